"""The gateway as an OAuth client of its backends' authorization servers.

    outbound.py  a backend call's token by the backend's `auth` mode: client_credentials,
                 token_exchange (RFC 8693), user_oauth (each user's own grant)
    client.py    HTTP to authorization servers: metadata (RFC 8414), token requests, revocation
    tokens.py    tokens cached until shortly before they expire, fetched once, shared by replicas
    grants.py    users' grants, sealed, listed and revoked
    flows.py     a user authorizing the gateway: link, PKCE sign-in, callback
    crypto.py    AES-256-GCM with rotated keys for everything stored
    store.py     memory or Redis
"""
