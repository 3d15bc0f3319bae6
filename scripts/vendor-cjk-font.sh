#!/usr/bin/env bash
# Vendor the dashboard's Chinese web font: Noto Sans SC (SIL Open Font License 1.1),
# regular weight, as the npm package @fontsource/noto-sans-sc slices it (about 100 WOFF2
# files, each with the `unicode-range` it covers, 2.6 MB in all). A browser fetches only
# the slices of the characters a page shows, and none when a local CJK font comes first
# in the page's font stack (style.css). Run again to move to another version.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-5.3.1}
target=src/agent_reach/server/dashboard/vendor/noto-sans-sc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@fontsource/noto-sans-sc@$VERSION" >/dev/null && tar xzf ./*.tgz)
rm -rf "$target"
mkdir -p "$target/files"
# the slices 400.css names (the package also has one whole-subset file, unused here)
for slice in $(grep -o "noto-sans-sc-[0-9a-z-]*-400-normal\.woff2" "$work/package/400.css"); do
  cp "$work/package/files/$slice" "$target/files/"
done
cp "$work/package/LICENSE" "$target/LICENSE"
# The family renamed, so that a locally installed "Noto Sans SC" is never shadowed by the
# download; WOFF2 only (every browser the dashboard supports reads it).
sed -e "s/font-family: 'Noto Sans SC'/font-family: 'Reach Noto Sans SC'/" \
  -e "s|, url(./files/[^)]*\.woff) format('woff')||" \
  "$work/package/400.css" >"$target/noto-sans-sc.css"
echo "@fontsource/noto-sans-sc $VERSION: $(ls "$target/files" | wc -l) slices in $target"
