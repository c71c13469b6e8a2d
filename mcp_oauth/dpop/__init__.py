"""DPoP, RFC 9449: sender-constrained access tokens at the authorization server and the resource server.

* :mod:`.proof` — a DPoP proof JWT checked (§4.3): ``typ``, asymmetric ``alg``, public ``jwk``,
  signature, ``htm``, ``htu``, ``iat`` window, ``ath``, ``nonce``; the key's RFC 7638 thumbprint.
* :mod:`.nonce` — stateless server nonces (§8, §9), valid on every worker.
* :mod:`.replay` — ``jti`` seen once per key within the proof window, across workers (§11.1).
* :mod:`.bindings` — which tokens are bound to which key (``cnf.jkt``, §6.1), and who needs DPoP.
* :mod:`.token_endpoint` — the token endpoint's proof check and ``token_type=DPoP`` issuance (§5).
* :mod:`.resource` — the resource server's check of ``Authorization: DPoP`` requests (§7).
* :mod:`.challenges` — ``WWW-Authenticate: DPoP`` challenges (§7.1).
"""
