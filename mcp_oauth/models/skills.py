"""Skills managed in the admin (Skills extension ``io.modelcontextprotocol/skills``, SEP-2640).

A :class:`Skill` is a skill path (``refunds``, ``acme/billing/refunds``: its last segment is the
skill's ``name``) with its files (:class:`SkillFile`, ``SKILL.md`` among them), who may see it
(``required_scopes``, ``organizations``, ``is_active``) and a ``version`` raised each time its set of
files or their content changes. Each file's ``size`` and ``digest`` (``sha256:<hex>``) are computed
once, when the file is saved; the skill's ``front_matter`` is parsed from its ``SKILL.md`` then too
(:meth:`Skill.refresh_manifest`, run on every file save and delete; it sends
:data:`mcp_oauth.signals.skill_changed`).
"""

from __future__ import annotations

import hashlib

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from mcp_oauth.shared.skill_format import SKILL_MD, InvalidSkill, check_file_path, digest, parse_front_matter
from mcp_oauth.signals import skill_changed

__all__ = ["Skill", "SkillFile"]


class Skill(models.Model):
    """A skill served from the database (see the module docstring)."""

    path = models.CharField(
        _("skill path"),
        max_length=255,
        unique=True,
        help_text=_(
            "Where the skill is served: skill://<path>/SKILL.md. Its last segment must equal the name in "
            "SKILL.md's front matter; earlier segments are an optional prefix, e.g. acme/billing/refunds."
        ),
    )
    is_active = models.BooleanField(_("active"), default=True, help_text=_("Inactive skills are not served."))
    required_scopes = models.CharField(
        _("required scopes"),
        max_length=500,
        blank=True,
        help_text=_("Space-separated scopes a token needs to see the skill; blank: none beyond the endpoint's."),
    )
    organizations = models.ManyToManyField(
        "mcp_oauth.Organization",
        blank=True,
        related_name="skills",
        verbose_name=_("organizations"),
        help_text=_("Only requests acting for these organizations see the skill; none: every request."),
    )
    version = models.PositiveIntegerField(
        _("version"), default=0, editable=False, help_text=_("Raised each time the skill's files change.")
    )
    front_matter = models.JSONField(_("front matter"), default=dict, blank=True, editable=False)
    manifest_digest = models.CharField(max_length=64, blank=True, editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("skill")
        verbose_name_plural = _("skills")
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        """The skill's name: the last segment of its path."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def scope_list(self) -> list[str]:
        return self.required_scopes.split()

    def refresh_manifest(self) -> None:
        """Re-read ``SKILL.md``'s front matter and raise ``version`` when the files' ``(path, digest)``
        set changed since the last time (one query for the digests, one for ``SKILL.md``)."""
        rows = sorted(self.files.values_list("path", "digest"))
        fingerprint = hashlib.sha256(repr(rows).encode()).hexdigest()
        front: dict = {}
        skill_md = self.files.filter(path=SKILL_MD).values_list("content", flat=True).first()
        if skill_md is not None:
            try:
                front = parse_front_matter(bytes(skill_md))
            except InvalidSkill:
                front = {}
        fields = {"front_matter": front, "updated_at": timezone.now()}
        if fingerprint != self.manifest_digest:
            fields |= {"manifest_digest": fingerprint, "version": models.F("version") + 1}
        Skill.objects.filter(pk=self.pk).update(**fields)
        self.refresh_from_db(fields=["front_matter", "manifest_digest", "version", "updated_at"])
        skill_changed.send(sender=Skill, skill=self)


class SkillFile(models.Model):
    """One file of a :class:`Skill`: its path inside the skill, its bytes, their size and digest."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="files", verbose_name=_("skill"))
    path = models.CharField(
        _("path"), max_length=1024, help_text=_("Relative to the skill, / separated: SKILL.md, references/FORMS.md.")
    )
    content = models.BinaryField(_("content"), editable=True)
    size = models.PositiveBigIntegerField(_("size (bytes)"), default=0, editable=False)
    digest = models.CharField(_("digest"), max_length=71, editable=False)

    class Meta:
        verbose_name = _("skill file")
        verbose_name_plural = _("skill files")
        ordering = ["skill", "path"]
        constraints = [models.UniqueConstraint(fields=["skill", "path"], name="mcp_oauth_skillfile_unique_path")]

    def __str__(self) -> str:
        return self.path

    def clean(self) -> None:
        try:
            check_file_path(self.path)
        except InvalidSkill as exc:
            raise ValidationError({"path": str(exc)}) from None

    def save(self, *args, refresh: bool = True, **kwargs) -> None:
        """Save, with ``size`` and ``digest`` computed from ``content``; ``refresh=False`` leaves
        the skill's :meth:`~Skill.refresh_manifest` to the caller (several files saved as one
        change: one new version)."""
        data = bytes(self.content or b"")
        self.content = data
        self.size = len(data)
        self.digest = digest(data)
        with transaction.atomic():
            super().save(*args, **kwargs)
            if refresh:
                self.skill.refresh_manifest()

    def delete(self, *args, refresh: bool = True, **kwargs):
        skill = self.skill
        with transaction.atomic():
            result = super().delete(*args, **kwargs)
            if refresh:
                skill.refresh_manifest()
        return result
