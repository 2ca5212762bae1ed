"""compose/ runs the same CLI: every command there must parse with our own parser."""

from __future__ import annotations

import json
import re
from pathlib import Path

from eventcloud.cli.main import build_parser

COMPOSE = Path(__file__).resolve().parents[2] / "compose"


def compose_commands() -> list[list[str]]:
    text = (COMPOSE / "docker-compose.yml").read_text()
    return [json.loads(m.group(1)) for m in re.finditer(r"command:\s*(\[.*\])", text)]


def test_every_compose_command_is_accepted_by_the_cli():
    commands = compose_commands()
    assert len(commands) == 2
    for command in commands:
        args = build_parser().parse_args(command)
        assert args.command == "peer"
    assert any("--join" in c for c in commands)


def test_every_compose_peer_names_the_three_etcd_members_defined_there_as_its_authority():
    text = (COMPOSE / "docker-compose.yml").read_text()
    members = re.findall(r"^  (etcd\d):$", text, re.M)
    assert members == ["etcd1", "etcd2", "etcd3"]
    for command in compose_commands():
        authority = build_parser().parse_args(command).authority
        assert authority == "etcd://" + ",".join(f"{m}:2379" for m in members)


def test_dockerfile_default_command_is_accepted_by_the_cli():
    text = (COMPOSE / "Dockerfile").read_text()
    entry = json.loads(re.search(r"ENTRYPOINT\s*(\[.*\])", text).group(1))
    cmd = json.loads(re.search(r"CMD\s*(\[.*\])", text).group(1))
    assert entry == ["eventcloud"]
    assert build_parser().parse_args(cmd).command == "peer"
