"""The documentation stands alone: no link or path leads outside the repository, and commands are copyable."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.docs import blocks, sections

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("examples/*")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_leaves_the_repository(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    assert "../shared" not in text and "/work/shared" not in text
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        resolved = (document.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{target} leads outside the repository"
        assert resolved.exists(), f"{target} does not exist"


def test_import_definitions_is_shown_with_an_absolute_path() -> None:
    # rabbitmqctl resolves the file on the node, from the node's working directory
    for document in DOCUMENTS:
        for command in re.findall(r"rabbitmqctl import_definitions ([^`\s]+)", document.read_text(encoding="utf-8")):
            assert command.startswith(("/", '"$PWD/', "$PWD/")), f"{document.name}: {command}"


# Options of `pip install` that take a value (`-c constraints.txt`): the value is not a requirement.
PIP_VALUED_OPTIONS = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url"}


def _pip_install_requirements(text: str) -> list[str]:
    """What each `pip install` of a text installs: requirements (``'warren-webhooks[postgres]'``) or paths
    (``.``, ``".[postgres]"``), as a shell would pass them, options left out."""
    found: list[str] = []
    for command in re.findall(r"pip install ([^`\n]+)", text):
        words = iter(shlex.split(command, comments=True))
        for word in words:
            if word in PIP_VALUED_OPTIONS:
                next(words, None)
            elif not word.startswith("-"):
                found.append(word)
    return found


def test_every_pip_install_names_the_distribution_and_extras_it_has() -> None:
    # The distribution is not called `warren` (another project on the index is): docs/receiving.md once said
    # `pip install 'warren[postgres]'`. CHANGELOG.md is history and may quote what was wrong.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    checked: list[str] = []
    for document in (d for d in DOCUMENTS if d.name != "CHANGELOG.md"):
        for argument in _pip_install_requirements(document.read_text(encoding="utf-8")):
            where = f"{document.relative_to(ROOT)}: pip install {argument}"
            if argument.startswith((".", "/")):  # this checkout: its own name, by definition
                named = re.fullmatch(r"[^\[]+(?:\[([^\]]*)\])?", argument)
                assert named is not None, where
                wanted = {e.strip() for e in (named.group(1) or "").split(",") if e.strip()}
            else:
                requirement = Requirement(argument)
                assert canonicalize_name(requirement.name) == canonicalize_name(project["name"]), where
                wanted = set(requirement.extras)
            assert wanted <= extras, f"{where}: no extra {sorted(wanted - extras)} (pyproject has {sorted(extras)})"
            checked.append(where)
    assert any("receiving.md" in c and "[postgres]" in c for c in checked), checked  # the scan found them


SHELL = ("sh", "")  # a block of commands: ```sh, or a plain fence


def test_a_section_that_exports_variables_exports_every_env_name_its_configuration_reads() -> None:
    # docs/endpoints.md's "Set up once" named env:WARREN_API_TOKEN and never exported it: `warren api` would not
    # start. Wherever a section's shell lines export variables for its TOML, they export all it reads.
    checked = []
    for document in DOCUMENTS:
        if document.suffix != ".md":
            continue
        for title, text in sections(document).items():
            found = blocks(text)
            exported = {n for b in found if b.info in SHELL for n in re.findall(r"^export (\w+)=", b.text, re.M)}
            if not exported:
                continue
            read = {n for b in found if b.info == "toml" for n in re.findall(r"env:(\w+)", b.text)}
            assert read <= exported, f"{document.name}, {title!r}: {sorted(read - exported)} never exported"
            checked.append(title)
    assert "Set up once" in checked
