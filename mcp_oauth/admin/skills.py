"""Admin screen of the skills served from the database (:class:`~mcp_oauth.models.Skill`, the Skills
extension): the skill's path, who sees it, and its files inline, each given as text or uploaded.

On save the files are checked as one skill: a ``SKILL.md`` whose front matter has a valid ``name``
equal to the path's last segment and a ``description``, file paths inside the skill, the
per-skill limits (``SKILL_MAX_FILES``, ``SKILL_MAX_BYTES``). The files are then saved as one
change: the skill's ``version`` goes up by one. Text typed in the form is stored with ``\\n``
line ends. Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils.translation import gettext_lazy as _

from mcp_oauth.models import Skill, SkillFile
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.skill_format import (
    SKILL_MD,
    InvalidSkill,
    check_file_path,
    check_skill_path,
    parse_front_matter,
    skill_uri,
)

__all__ = ["SkillAdmin", "SkillFileForm", "SkillFileInline", "SkillForm"]


class SkillForm(forms.ModelForm):
    class Meta:
        model = Skill
        fields = ("path", "is_active", "required_scopes", "organizations")

    def clean_path(self) -> str:
        path = self.cleaned_data["path"].strip().strip("/")
        try:
            return check_skill_path(path)
        except InvalidSkill as exc:
            raise ValidationError(str(exc)) from None


class SkillFileForm(forms.ModelForm):
    """One file: its path, and its content as text or as an upload (an upload wins; neither keeps
    the stored content of an existing file)."""

    text = forms.CharField(label=_("text"), required=False, strip=False, widget=forms.Textarea(attrs={"rows": 8}))
    upload = forms.FileField(label=_("or upload"), required=False)

    class Meta:
        model = SkillFile
        fields = ("path",)

    content: bytes | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            try:
                self.fields["text"].initial = bytes(self.instance.content).decode("utf-8")
            except UnicodeDecodeError:
                self.fields["text"].help_text = _("Binary content (%(size)s bytes): kept unless replaced.") % {
                    "size": self.instance.size
                }

    def clean_path(self) -> str:
        path = self.cleaned_data["path"].strip()
        try:
            return check_file_path(path)
        except InvalidSkill as exc:
            raise ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        limit = int(mcp_oauth_settings.SKILL_MAX_BYTES)
        upload = data.get("upload")
        if upload is not None:
            if upload.size > limit:
                raise ValidationError({"upload": _("Larger than %(limit)s bytes.") % {"limit": limit}})
            self.content = upload.read()
        elif data.get("text"):
            self.content = data["text"].replace("\r\n", "\n").encode("utf-8")
        elif self.instance.pk:
            self.content = bytes(self.instance.content)  # no new text: the stored content stays
        elif data.get("path"):
            self.content = b""  # a new empty file
        else:
            self.content = None  # a blank extra form
        if self.content is not None and len(self.content) > limit:
            raise ValidationError({"text": _("Larger than %(limit)s bytes.") % {"limit": limit}})
        return data


class SkillFileFormSet(forms.BaseInlineFormSet):
    """The files checked as one skill; saved as one change (one new version)."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        files: dict[str, bytes] = {}
        for form in self.forms:
            if not getattr(form, "cleaned_data", None) or form.cleaned_data.get("DELETE"):
                continue
            if getattr(form, "content", None) is None:
                continue
            path = form.cleaned_data["path"]
            if path in files:
                raise ValidationError(_("The file %(path)s is listed twice.") % {"path": path})
            files[path] = form.content  # type: ignore[attr-defined]
        if SKILL_MD not in files:
            raise ValidationError(_("A skill needs a SKILL.md file."))
        try:
            front = parse_front_matter(files[SKILL_MD])
        except InvalidSkill as exc:
            raise ValidationError(f"SKILL.md: {exc}") from None
        name = (self.instance.path or "").rsplit("/", 1)[-1]
        if name and front["name"] != name:
            raise ValidationError(
                _("SKILL.md names the skill %(front)r: the skill path must end with it (it ends with %(name)r).")
                % {"front": front["name"], "name": name}
            )
        if len(files) > int(mcp_oauth_settings.SKILL_MAX_FILES):
            raise ValidationError(_("More than %(n)s files.") % {"n": mcp_oauth_settings.SKILL_MAX_FILES})
        if sum(len(c) for c in files.values()) > int(mcp_oauth_settings.SKILL_MAX_BYTES):
            raise ValidationError(_("More than %(n)s bytes in all.") % {"n": mcp_oauth_settings.SKILL_MAX_BYTES})

    def save(self, commit: bool = True) -> list[SkillFile]:
        self.new_objects: list[SkillFile] = []
        self.changed_objects: list[tuple[SkillFile, list[str]]] = []
        self.deleted_objects: list[SkillFile] = []
        with transaction.atomic():
            for form in self.initial_forms:
                if self.can_delete and self._should_delete_form(form) and form.instance.pk:  # type: ignore[attr-defined]
                    self.deleted_objects.append(form.instance)
                    form.instance.delete(refresh=False)
            for form in self.forms:
                if self._should_delete_form(form) or getattr(form, "content", None) is None:  # type: ignore[attr-defined]
                    continue
                is_new = not form.instance.pk
                if is_new and not form.has_changed():
                    continue
                obj = form.save(commit=False)
                obj.skill = self.instance
                obj.content = form.content  # type: ignore[attr-defined]
                obj.save(refresh=False)
                if is_new:
                    self.new_objects.append(obj)
                elif form.has_changed():
                    self.changed_objects.append((obj, form.changed_data))
            self.instance.refresh_manifest()
        return [*self.new_objects, *(obj for obj, _ in self.changed_objects)]


class SkillFileInline(admin.StackedInline):
    model = SkillFile
    form = SkillFileForm
    formset = SkillFileFormSet
    extra = 1
    fields = ("path", "text", "upload", "size", "digest")
    readonly_fields = ("size", "digest")


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    """Skills served to MCP clients from the database (docs/how-to/skills.md)."""

    form = SkillForm
    inlines = [SkillFileInline]
    list_display = ("path", "name", "is_active", "version", "file_count", "updated_at")
    list_filter = ("is_active",)
    search_fields = ("path",)
    filter_horizontal = ("organizations",)
    readonly_fields = ("uri", "version", "updated_at")
    fields = ("path", "uri", "is_active", "required_scopes", "organizations", "version", "updated_at")

    @admin.display(description=_("URI"))
    def uri(self, obj: Skill) -> str:
        return skill_uri(obj.path) if obj.pk else "-"

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).annotate(_files=Count("files"))

    @admin.display(description=_("files"), ordering="_files")
    def file_count(self, obj: Skill) -> int:
        return obj._files  # type: ignore[attr-defined]
