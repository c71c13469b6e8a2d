"""The ``{% load mcp_app %}`` template tags (``mcp_oauth.templatetags.mcp_app``): static CSS and
JavaScript inlined without a way to end their element, other paths refused, ``data:`` URIs, the
bridge script with its app info escaped."""

from __future__ import annotations

import pytest
from django.template import Context, Template, TemplateSyntaxError


def render(source: str, **context) -> str:
    return Template("{% load mcp_app %}" + source).render(Context(context))


def test_static_css_and_js_are_inlined():
    css = render('{% mcp_app_static "project/notes_app.css" %}')
    assert css.startswith("<style>/* The notes view") and css.endswith("</style>")


def test_inlined_javascript_cannot_end_its_script_element(tmp_path, settings):
    (tmp_path / "evil.js").write_text('var s = "</script><img src=x>"; var t = "</SCRIPT>";')
    (tmp_path / "evil.css").write_text("a{}</style><script>x()</script>")
    settings.STATICFILES_DIRS = [str(tmp_path)]
    out = render('{% mcp_app_static "evil.js" %}')
    assert out == '<script>var s = "<\\/script><img src=x>"; var t = "<\\/SCRIPT>";</script>'
    with pytest.raises(TemplateSyntaxError, match="</style"):
        render('{% mcp_app_static "evil.css" %}')


@pytest.mark.parametrize("path", ["project/missing.css", "../settings.py", "project/notes_app.txt"])
def test_other_static_paths_are_refused(path):
    with pytest.raises(TemplateSyntaxError):
        render("{% mcp_app_static path %}", path=path)


def test_data_uri(tmp_path, settings):
    (tmp_path / "dot.png").write_bytes(b"\x89PNG")
    settings.STATICFILES_DIRS = [str(tmp_path)]
    assert render('{% mcp_app_data_uri "dot.png" %}') == "data:image/png;base64,iVBORw=="


def test_the_bridge_escapes_its_app_info():
    out = render('{% mcp_app_bridge name=name version="2" %}', name='"><script>x()</script>')
    assert out.startswith('<script data-app-name="&quot;&gt;&lt;script&gt;x()&lt;/script&gt;" data-app-version="2">')
    assert '"ui/initialize"' in out and '"ui/notifications/initialized"' in out and '"tools/call"' in out
