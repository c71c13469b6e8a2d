"""DPoP, RFC 9449: the proof layer shared by the authorization server and the resource server.

This package imports neither of them: the authorization server's use of it is in
:mod:`mcp_oauth.authorization_server.token_endpoint.dpop` (the token endpoint's proof check and
``token_type=DPoP`` issuance, §5) and :mod:`mcp_oauth.authorization_server.token_endpoint.dpop_requirements`
(which clients and resources require DPoP); the resource server's in
:mod:`mcp_oauth.resource_server.authentication` and :mod:`mcp_oauth.resource_server.challenges`
(``WWW-Authenticate: DPoP`` challenges, §7.1).

* :mod:`.proof` — a DPoP proof JWT checked (§4.3): ``typ``, asymmetric ``alg``, public ``jwk``,
  signature, ``htm``, ``htu``, ``iat`` window, ``ath``, ``nonce``; the key's RFC 7638 thumbprint.
* :mod:`.nonce` — stateless server nonces (§8, §9), valid on every worker.
* :mod:`.replay` — ``jti`` seen once per key within the proof window, across workers (§11.1).
* :mod:`.bindings` — which tokens are bound to which key (``cnf.jkt``, §6.1).
* :mod:`.resource` — the resource server's check of ``Authorization: DPoP`` requests (§7).
* :mod:`.request_urls` — the URLs a proof's ``htu`` may name.
* :mod:`.metadata`, :mod:`.introspection` — the DPoP members of metadata and introspection answers.
"""
