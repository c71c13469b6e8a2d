#!/usr/bin/env python3
"""The module moves of issue 29 ("authorization server in rooms, one way down"), as one step.

Run from anywhere inside a checkout (``python scripts/house_moves.py``); it is idempotent: a
module already at its new place is not moved again, and a file that names no old path is left
as it is. For each entry of :data:`MOVES` it

1. ``git mv``\\ s the module to its new place (creating the new package with an ``__init__.py``);
2. ``git mv``\\ s its mirrored test file, ``tests/<old dir>/test_<old name>.py`` to
   ``tests/<new dir>/test_<new name>.py``, when that file exists (creating the folders, each
   with an ``__init__.py``);
3. rewrites every import and every dotted or slash path naming the old module, in every text file
   git tracks (code, tests, docs, bench, project, noxfile, pyproject), except the changelog
   (its past entries name the paths of their time), this script, and the thin alias modules
   that keep an old public path working (files carrying :data:`ALIAS_MARKER`);
4. sorts the imports and formats the Python files it changed (ruff, when installed).

``--dry-run`` prints what would change and changes nothing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: old dotted module -> new dotted module.
MOVES: dict[str, str] = {
    # client authentication at the token, introspection and revocation endpoints
    "mcp_oauth.authorization_server.client_authentication": "mcp_oauth.authorization_server.client_auth.client_authentication",
    "mcp_oauth.authorization_server.client_assertion": "mcp_oauth.authorization_server.client_auth.client_assertion",
    "mcp_oauth.authorization_server.client_secrets": "mcp_oauth.authorization_server.client_auth.client_secrets",
    "mcp_oauth.authorization_server.jwks": "mcp_oauth.authorization_server.client_auth.jwks",
    "mcp_oauth.authorization_server.auth_extensions": "mcp_oauth.authorization_server.client_auth.auth_extensions",
    "mcp_oauth.authorization_server.introspection_policy": "mcp_oauth.authorization_server.client_auth.introspection_policy",
    "mcp_oauth.authorization_server.assertions": "mcp_oauth.authorization_server.client_auth.assertions",
    # enterprise identity: ID-JAG (JWT bearer grant), its issuers and their users
    "mcp_oauth.authorization_server.enterprise": "mcp_oauth.authorization_server.enterprise_identity.providers",
    "mcp_oauth.authorization_server.enterprise_users": "mcp_oauth.authorization_server.enterprise_identity.users",
    "mcp_oauth.authorization_server.assertion_metadata": "mcp_oauth.authorization_server.enterprise_identity.assertion_metadata",
    "mcp_oauth.authorization_server.jwt_bearer": "mcp_oauth.authorization_server.enterprise_identity.jwt_bearer",
    # codes and refresh tokens: rotation, redemption, grants
    "mcp_oauth.authorization_server.rotation": "mcp_oauth.authorization_server.tokens.rotation",
    "mcp_oauth.authorization_server.rotation_statement": "mcp_oauth.authorization_server.tokens.rotation_statement",
    "mcp_oauth.authorization_server.redeemed": "mcp_oauth.authorization_server.tokens.redeemed",
    "mcp_oauth.authorization_server.grants": "mcp_oauth.authorization_server.tokens.grants",
    # the token endpoint's extensions: DPoP, resource selection, request guards
    "mcp_oauth.authorization_server.dpop_token_endpoint": "mcp_oauth.authorization_server.token_endpoint.dpop",
    "mcp_oauth.authorization_server.dpop_requirements": "mcp_oauth.authorization_server.token_endpoint.dpop_requirements",
    "mcp_oauth.authorization_server.resource_selection": "mcp_oauth.authorization_server.token_endpoint.resource_selection",
    "mcp_oauth.authorization_server.guards": "mcp_oauth.authorization_server.token_endpoint.guards",
    # the pages a person sees
    "mcp_oauth.authorization_server.consent": "mcp_oauth.authorization_server.pages.consent",
    "mcp_oauth.authorization_server.connected_apps": "mcp_oauth.authorization_server.pages.connected_apps",
    "mcp_oauth.authorization_server.login": "mcp_oauth.authorization_server.pages.login",
    # clients: dynamic registration, its limits, the client cache, the trust policy
    "mcp_oauth.authorization_server.registration": "mcp_oauth.authorization_server.client_registry.registration",
    "mcp_oauth.authorization_server.registration_limits": "mcp_oauth.authorization_server.client_registry.registration_limits",
    "mcp_oauth.authorization_server.clients": "mcp_oauth.authorization_server.client_registry.clients",
    "mcp_oauth.authorization_server.trust": "mcp_oauth.authorization_server.client_registry.trust",
    # a user's data: export, erasure, what happens when the user changes (password, deletion)
    "mcp_oauth.authorization_server.erasure": "mcp_oauth.authorization_server.user_data.erasure",
    "mcp_oauth.authorization_server.user_export": "mcp_oauth.authorization_server.user_data.export",
    "mcp_oauth.authorization_server.lifecycle": "mcp_oauth.authorization_server.user_data.lifecycle",
    # the drain belongs to the transport it drains
    "mcp_oauth.mcp_server.drain": "mcp_oauth.mcp_server.transport.drain",
}

#: The docstring of each package this script creates.
PACKAGES: dict[str, str] = {
    "mcp_oauth.authorization_server.client_auth": "Client authentication: secrets, private_key_jwt (RFC 7523 assertions), key sets, introspection policy.",
    "mcp_oauth.authorization_server.enterprise_identity": "Enterprise identity: ID-JAG (RFC 7523 JWT bearer grant), issuers and their users.",
    "mcp_oauth.authorization_server.tokens": "Codes and refresh tokens: rotation, redemption, grants.",
    "mcp_oauth.authorization_server.token_endpoint": "The token endpoint's extensions: DPoP, resource selection, request guards.",
    "mcp_oauth.authorization_server.pages": "The pages a person sees: consent, connected apps, login.",
    "mcp_oauth.authorization_server.client_registry": "Clients: dynamic registration (RFC 7591), its limits, the client cache, the trust policy.",
    "mcp_oauth.authorization_server.user_data": "A user's data: export, erasure, and the receivers run when the user changes or goes.",
}

#: A file holding this line is a deliberate alias at an old path: never rewritten, never moved.
ALIAS_MARKER = "# house_moves: alias of a moved module"

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".json", ".html", ".js", ".ts"}
SKIPPED = {"docs/changelog.md", "scripts/house_moves.py"}


def _git(*args: str, dry: bool = False) -> str:
    if dry:
        print("git", *args)
        return ""
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _path(dotted: str) -> Path:
    return Path(*dotted.split(".")).with_suffix(".py")


def _test_path(dotted: str) -> Path:
    parts = dotted.split(".")
    return Path("tests", *parts[:-1], f"test_{parts[-1]}.py")


def _is_alias(path: Path) -> bool:
    try:
        return ALIAS_MARKER in path.read_text()
    except (OSError, UnicodeDecodeError):
        return False


def _ensure_package(directory: Path, docstring: str | None, dry: bool) -> None:
    """Create ``directory`` and an ``__init__.py`` in it and in every parent up to the root."""
    chain = []
    current = directory
    while current != Path(".") and current.parts:
        chain.append(current)
        current = current.parent
    for folder in reversed(chain):
        init = ROOT / folder / "__init__.py"
        if init.exists():
            continue
        text = f'"""{docstring}"""\n' if docstring and folder == directory else ""
        print(f"create {folder / '__init__.py'}")
        if not dry:
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(text)
            _git("add", str(folder / "__init__.py"))


def move_files(dry: bool) -> list[tuple[Path, Path]]:
    moved = []
    for old, new in MOVES.items():
        pairs = [
            (_path(old), _path(new), PACKAGES.get(new.rpartition(".")[0])),
            (_test_path(old), _test_path(new), None),
        ]
        for source, target, docstring in pairs:
            if not (ROOT / source).exists() or (ROOT / target).exists() or _is_alias(ROOT / source):
                continue
            _ensure_package(target.parent, docstring, dry)
            print(f"move {source} -> {target}")
            _git("mv", str(source), str(target), dry=dry)
            moved.append((source, target))
    return moved


def _split_from_imports(text: str) -> str:
    """``from pkg import a, b`` where ``pkg.a`` moved: one ``from`` line per new home."""
    parents: dict[str, dict[str, str]] = {}
    for old, new in MOVES.items():
        parent, _, name = old.rpartition(".")
        parents.setdefault(parent, {})[name] = new
    for parent, children in parents.items():
        pattern = re.compile(
            rf"^(?P<indent>[ \t]*)from {re.escape(parent)} import "
            r"(?:\((?P<group>[^)]*)\)|(?P<line>[^\n(]*?))[ \t]*(?P<comment>#[^\n]*)?$",
            re.M,
        )

        def rewrite(match: re.Match[str], parent: str = parent, children: dict[str, str] = children) -> str:
            names = [n.strip() for n in (match["group"] or match["line"] or "").replace("\n", " ").split(",")]
            names = [n for n in names if n and not n.startswith("#")]
            if not any(n.split(" as ")[0].strip() in children for n in names):
                return match.group(0)
            indent, kept, lines = match["indent"], [], []
            for name in names:
                imported, _, alias = (part.strip() for part in name.partition(" as "))
                if imported not in children:
                    kept.append(name)
                    continue
                home, _, new_name = children[imported].rpartition(".")
                local = alias or imported
                lines.append(f"{indent}from {home} import {new_name}" + (f" as {local}" if local != new_name else ""))
            if kept:
                lines.insert(0, f"{indent}from {parent} import {', '.join(kept)}")
            if match["comment"]:
                lines[0] += f"  {match['comment']}"
            return "\n".join(lines)

        text = pattern.sub(rewrite, text)
    return text


def _patterns() -> list[tuple[re.Pattern[str], str]]:
    found = []
    # longest first, so that no old path is rewritten inside a longer one
    for old, new in sorted(MOVES.items(), key=lambda item: -len(item[0])):
        found.append((re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)"), new))
        # the same path in a regular expression (``mcp_oauth\.authorization_server\.x``)
        escaped_old, escaped_new = old.replace(".", "\\."), new.replace(".", "\\.")
        found.append((re.compile(rf"(?<![\w.]){re.escape(escaped_old)}(?!\w)"), escaped_new.replace("\\", "\\\\")))
        old_slash, new_slash = str(_path(old)), str(_path(new))
        # mcp_oauth/authorization_server/x.py and the short authorization_server/x.py
        found.append((re.compile(rf"(?<![\w./]){re.escape(old_slash)}(?!\w)"), new_slash))
        short_old, short_new = old_slash.partition("/")[2], new_slash.partition("/")[2]
        found.append((re.compile(rf"(?<![\w./]){re.escape(short_old)}(?!\w)"), short_new))
        found.append((re.compile(rf"(?<![\w./]){re.escape(str(_test_path(old)))}(?!\w)"), str(_test_path(new))))
    return found


def rewrite_text(dry: bool) -> list[Path]:
    patterns = _patterns()
    changed = []
    for name in _git("ls-files").splitlines():
        path = ROOT / name
        if name in SKIPPED or path.suffix not in TEXT_SUFFIXES or not path.is_file() or "node_modules" in name:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if ALIAS_MARKER in text:
            continue
        new = _split_from_imports(text) if path.suffix == ".py" else text
        for pattern, replacement in patterns:
            new = pattern.sub(replacement, new)
        if new != text:
            print(f"rewrite {name}")
            changed.append(path)
            if not dry:
                path.write_text(new)
    return changed


def tidy(paths: list[Path], dry: bool) -> None:
    python = [str(p) for p in paths if p.suffix == ".py"]
    ruff = shutil.which("ruff") or (str(ROOT / ".venv/bin/ruff") if (ROOT / ".venv/bin/ruff").exists() else None)
    if dry or not python or ruff is None:
        return
    subprocess.run([ruff, "check", "--select", "I", "--fix", "--quiet", *python], cwd=ROOT, check=False)
    subprocess.run([ruff, "format", "--quiet", *python], cwd=ROOT, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    args = parser.parse_args(argv)
    moved = move_files(args.dry_run)
    changed = rewrite_text(args.dry_run)
    tidy(changed, args.dry_run)
    print(f"{len(moved)} file(s) moved, {len(changed)} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
