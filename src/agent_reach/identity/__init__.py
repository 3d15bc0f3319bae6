"""Who a request comes from beyond minted API keys: IdP tokens (OIDC/JWT), client
certificates (mutual TLS), the browser origins allowed in, and TLS both ways."""
