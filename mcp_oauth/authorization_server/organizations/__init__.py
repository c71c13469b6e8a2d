"""Organizations at the authorization server: which organization a request acts for, its client policy, its tokens."""
