-- Delete a context and every segment of its lists at once; 1 when it existed, else 0.
-- KEYS: context
for name, value in pairs(lists_of(KEYS[1])) do
  delete_list(KEYS[1], name, value)
end
return redis.call('DEL', KEYS[1])
