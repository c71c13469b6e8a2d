"""Enterprise-Managed Authorization: which local user an enterprise IdP's ID-JAG speaks for.

MCP ext-auth "Enterprise-Managed Authorization" §4.3 (the ID-JAG's claims) and its implementation
notes: ``iss`` + ``sub`` identify the user; an ``email`` claim may help link an existing account.

:func:`user_for_subject` maps a verified ID-JAG to a user, by the provider's ``user_policy``:

* every policy: the :class:`~mcp_oauth.models.EnterpriseIdentity` linked to ``(provider, sub)``;
* ``match_email``: else the one active user whose e-mail address equals the ``email`` claim
  (case-insensitively), when the claim comes with ``email_verified: true``; the link is stored;
* ``create``: as ``match_email``, else a new user (username = the e-mail address, or
  ``<sub>@<issuer host>``), linked; a verified e-mail longer than the user model's field (254
  characters for Django's) is refused rather than truncated;
* ``linked``: nothing else; unknown subjects are refused.

Sites wanting another mapping override :meth:`mcp_oauth.adapter.DefaultMCPAdapter.enterprise_user`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent, EnterpriseIdentity, EnterpriseIdentityProvider

__all__ = ["user_for_subject"]


def _email_user(claims: dict[str, Any]):
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or claims.get("email_verified") is not True:
        return None
    User = get_user_model()
    field = User.get_email_field_name()
    matches = list(User.objects.filter(**{f"{field}__iexact": email, "is_active": True})[:2])
    return matches[0] if len(matches) == 1 else None


def _new_user(provider: EnterpriseIdentityProvider, claims: dict[str, Any]):
    User = get_user_model()
    email = claims.get("email") if claims.get("email_verified") is True else None
    email_limit = getattr(User._meta.get_field(User.get_email_field_name()), "max_length", None)
    if isinstance(email, str) and email_limit is not None and len(email) > email_limit:
        return None  # the user model cannot store it (Django's: 254 characters): refused, not a database error
    host = urlsplit(provider.issuer).hostname or "idp"
    username = email if isinstance(email, str) and email else f"{claims['sub']}@{host}"
    username = username[: getattr(User._meta.get_field(User.USERNAME_FIELD), "max_length", None) or 150]
    if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
        return None  # never take over an account by name
    fields = {User.USERNAME_FIELD: username}
    if isinstance(email, str) and email:
        fields[User.get_email_field_name()] = email
    user = User(**fields)
    user.set_unusable_password()
    user.save()
    return user


def user_for_subject(provider: EnterpriseIdentityProvider, claims: dict[str, Any], request=None):
    """The active local user the ID-JAG's ``sub`` stands for at ``provider``, or None (refused).

    See the module docstring for the policies. A new link writes an
    ``enterprise.identity_linked`` audit event (``detail = {"issuer", "sub", "how"}``).
    """
    subject = claims["sub"]
    link = EnterpriseIdentity.objects.filter(provider=provider, subject=subject).select_related("user").first()
    if link is not None:
        EnterpriseIdentity.objects.filter(pk=link.pk).update(last_used_at=timezone.now())
        return link.user if link.user.is_active else None
    policy = provider.user_policy
    if policy == EnterpriseIdentityProvider.UserPolicy.LINKED_ONLY:
        return None
    how = "email"
    with transaction.atomic():
        user = _email_user(claims)
        if user is None and policy == EnterpriseIdentityProvider.UserPolicy.CREATE:
            user, how = _new_user(provider, claims), "created"
        if user is None:
            return None
        try:
            with transaction.atomic():
                EnterpriseIdentity.objects.create(
                    provider=provider, subject=subject, user=user, last_used_at=timezone.now()
                )
        except IntegrityError:  # a concurrent first use linked it: use that link
            link = EnterpriseIdentity.objects.filter(provider=provider, subject=subject).select_related("user").first()
            return link.user if link is not None and link.user.is_active else None
    record(
        AuditEvent.Kind.ENTERPRISE_IDENTITY_LINKED,
        request=request,
        user=user,
        detail={"issuer": provider.issuer, "sub": subject, "how": how},
    )
    return user
