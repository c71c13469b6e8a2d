"""The token endpoint's extensions: DPoP, resource selection, request guards."""
