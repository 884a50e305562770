"""The command line around the API: keys, the shoe key, simulate and replay over real HTTP."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from werkzeug.serving import make_server

from api import auth as auth_module
from api import cli
from api import client as client_module
from api.app import create_app
from api.auth import (
    KEYS_MAX,
    ApiKey,
    KeyConfigError,
    KeyRing,
    append_key,
    hash_key,
    keyring_from,
    parse_keys,
    read_keys,
    remove_keys,
)
from api.cli import gunicorn_argv, main
from api.database import POSTGRES_VARIABLES
from api.launch import CHAIN_NOT_WALKED_EXIT
from api.secrets_files import ShoeKeyError, load_shoe_key
from api.services import prepare_store
from api.simulate import next_decision
from ledger.application import GameLedger
from ledger.errors import DealRefused, ShoeKept
from ledger.rules import CASINO
from ledger.sealing import ShoeSealer
from projections.engine import Engine
from tests.e2e.conftest import KEYS, NAMES, Http, problem_of
from tests.faults import undecodable
from tests.scripted import SteeredShuffle


def test_keys_create_stores_only_the_hash_and_prints_the_key_once(tmp_path):
    path = tmp_path / "keys.jsonl"
    runner = CliRunner()
    result = runner.invoke(main, ["keys", "create", "--name", "alice", "--role", "auditor",
                                  "--file", str(path)])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("pbk_")
    assert len(key) > 40
    stored = path.read_text()
    assert key not in stored
    assert json.loads(stored)["key_hash"] == hash_key(key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = runner.invoke(main, ["keys", "create", "--name", "alice", "--role", "dealer",
                                 "--file", str(path)])
    assert again.exit_code == 1
    assert "already has a key named 'alice'" in again.output
    listed = runner.invoke(main, ["keys", "list", "--file", str(path)])
    assert listed.stdout == "alice\tauditor\n"
    nothing = runner.invoke(main, ["keys", "list", "--file", str(tmp_path / "none.jsonl")])
    assert (nothing.exit_code, nothing.stdout) == (0, "")
    assert nothing.stderr == f"no key file at {tmp_path / 'none.jsonl'}\n"
    revoked = runner.invoke(main, ["keys", "revoke", "--name", "alice", "--file", str(path)])
    assert revoked.exit_code == 0
    assert parse_keys(path.read_text(), source="x") == []


def test_a_key_file_at_its_cap_refuses_another_key_and_one_over_it_can_be_revoked_back(
        tmp_path):
    # The cap was checked when the file was read, not when a key was added: the 10,001st key
    # was printed as created, the server kept refusing it, and revoke could not mend the file.
    path = tmp_path / "keys.jsonl"
    path.write_text("".join(json.dumps({"name": f"k{n}", "role": "dealer",
                                        "key_hash": hash_key(f"key-{n}")}) + "\n"
                            for n in range(KEYS_MAX)))
    runner = CliRunner()
    refused = runner.invoke(main, ["keys", "create", "--name", "alice", "--role", "auditor",
                                   "--file", str(path)])
    assert refused.exit_code == 1
    assert f"holds {KEYS_MAX} keys, the most it may: revoke one" in refused.output
    assert "pbk_" not in refused.output
    assert len(read_keys(path)) == KEYS_MAX
    with path.open("a") as keys:  # an edit by hand past the cap
        keys.write(json.dumps({"name": "extra", "role": "dealer",
                               "key_hash": hash_key("key-extra")}) + "\n")
    listed = runner.invoke(main, ["keys", "list", "--file", str(path)])  # what to revoke
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[-1] == "extra\tdealer"
    assert f"holds {KEYS_MAX + 1} keys, more than the {KEYS_MAX} the server reads" \
        in listed.stderr
    revoked = runner.invoke(main, ["keys", "revoke", "--name", "extra", "--file", str(path)])
    assert revoked.exit_code == 0, revoked.output
    assert len(read_keys(path)) == KEYS_MAX


def test_a_key_file_written_as_a_json_list_is_kept_working_by_create_and_revoke(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": n, "role": "dealer", "key_hash": hash_key(f"k-{n}"),
                                 "created": "2026-01-01T00:00:00+00:00"}
                                for n in ("bob", "carol")], indent=1))
    runner = CliRunner()
    revoked = runner.invoke(main, ["keys", "revoke", "--name", "bob", "--file", str(path)])
    assert revoked.exit_code == 0, revoked.output
    created = runner.invoke(main, ["keys", "create", "--name", "dave", "--role", "auditor",
                                   "--file", str(path)])
    assert created.exit_code == 0, created.output
    keys = parse_keys(path.read_text(), source="x")
    assert [(k.name, k.role) for k in keys] == [("carol", "dealer"), ("dave", "auditor")]
    assert keys[0].key_hash == hash_key("k-carol")
    assert json.loads(path.read_text().splitlines()[0])["created"] == "2026-01-01T00:00:00+00:00"
    path.write_text('[{"name": "x"}')
    broken = runner.invoke(main, ["keys", "revoke", "--name", "x", "--file", str(path)])
    assert broken.exit_code == 1
    assert "is not JSON lines or a JSON list" in broken.output


def _add_keys(path, tag):
    for n in range(25):
        append_key(path, f"{tag}-{n}", "dealer")


def test_keys_created_at_once_by_two_processes_all_land(tmp_path):
    import multiprocessing

    target = tmp_path / "keys.jsonl"
    target.write_text("")
    target.chmod(0o640)  # readable by the service's group: an edit keeps that
    path = tmp_path / "link.jsonl"
    path.symlink_to(target)  # edits go to the file the link names
    workers = [multiprocessing.Process(target=_add_keys, args=(path, tag)) for tag in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0]
    names = {k.name for k in parse_keys(target.read_text(), source="x")}
    assert names == {f"{tag}-{n}" for tag in "ab" for n in range(25)}
    assert path.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_key_file_is_read_again_when_it_changes(tmp_path, database):
    path = tmp_path / "keys.jsonl"
    ring = keyring_from({"PITBOSS_KEYS_FILE": str(path)}, tmp_path / "unused")
    app = create_app({"DATABASE": database, "TESTING": True, "SHOE_KEY": b"k" * 32})
    app.extensions["pitboss.keys"] = ring
    http = Http(app.test_client())
    headers = {"Authorization": "Bearer pbk_nothing-yet"}
    problem_of(http.request("GET", "/whoami", role=None, headers=headers), 401)
    key = CliRunner().invoke(main, ["keys", "create", "--name", "bob", "--role", "cashier",
                                    "--file", str(path)]).stdout.strip()
    answer = http.request("GET", "/whoami", role=None, headers={"Authorization": f"Bearer {key}"})
    assert answer.get_json() == {"name": "bob", "role": "cashier"}
    CliRunner().invoke(main, ["keys", "revoke", "--name", "bob", "--file", str(path)])
    problem_of(http.request("GET", "/whoami", role=None,
                            headers={"Authorization": f"Bearer {key}"}), 401)


@pytest.mark.parametrize(("name", "why"), [
    ("ann\u034f", "holds no character that shows nothing, as U+034F"),
    ("Cafe\u0301", "is written in composed form"),
    ("\u3164", "holds no character that shows nothing, as U+3164"),
    ("Jefe \uff11", "holds no character standing for another that looks like it, as U+FF11 "
                    "(FULLWIDTH DIGIT ONE) does: write 'Jefe 1'")])
def test_a_new_key_name_is_written_one_way_only(tmp_path, name, why):
    # It names the actor of every event its key records, as a player's name names a player;
    # the refusal names the character at fault, as a table name's does.
    path = tmp_path / "keys.jsonl"
    with pytest.raises(KeyConfigError, match=f"^a new key name {re.escape(why)}"):
        append_key(path, name, "dealer")
    assert not path.exists()


def test_a_holder_named_before_names_were_checked_gets_a_new_key_as_recorded(tmp_path):
    # Revoked to be given a new key (a key leaked, a role changed), "\ufb01nance" could not
    # have one under the name the record knows as the actor of its events.
    path = tmp_path / "keys.jsonl"
    runner = CliRunner()
    refused = runner.invoke(main, ["keys", "create", "--name", "\ufb01nance", "--role",
                                   "cashier", "--file", str(path)])
    assert refused.exit_code == 1
    assert "pitboss keys create --as-recorded" in refused.output
    made = runner.invoke(main, ["keys", "create", "--name", "\ufb01nance", "--role", "cashier",
                                "--as-recorded", "--file", str(path)])
    assert made.exit_code == 0, made.output
    holder = KeyRing(path=path).find(made.stdout.strip())
    assert holder is not None
    assert holder.name == "\ufb01nance"
    # A name the file holds already is said so first, as recorded or not.
    again = runner.invoke(main, ["keys", "create", "--name", "\ufb01nance", "--role", "cashier",
                                 "--file", str(path)])
    assert "already has a key named" in again.output
    # Only the look-alikes earlier versions took: a character that shows nothing never was.
    hidden = runner.invoke(main, ["keys", "create", "--name", "admin\u3164", "--role", "manager",
                                  "--as-recorded", "--file", str(path)])
    assert hidden.exit_code == 1
    assert "shows nothing" in hidden.output
    assert "--as-recorded" not in hidden.output


def test_an_empty_key_name_is_refused_in_a_sentence(tmp_path):
    # A traceback (IndexError), where a name too long was refused in a sentence.
    path = tmp_path / "keys.jsonl"
    for name in ("", "x" * 65):
        made = CliRunner().invoke(main, ["keys", "create", "--name", name, "--role", "dealer",
                                         "--file", str(path)])
        assert made.exit_code == 1, made.output
        assert made.output.startswith("Error: a key name is 1 to 64 printable characters"), \
            made.output
    assert not path.exists()


def test_a_key_file_is_read_again_until_its_stamp_has_stayed_the_same_a_while(
        tmp_path, monkeypatch, caplog):
    # Written twice within one tick of a coarse timestamp (a second or two on some
    # filesystems), a file kept the stamp of a read made between the two writes: a text read
    # half written (no keys at all) was kept until the file changed again.
    monkeypatch.setattr(auth_module, "KEY_FILE_SETTLED_S", 0.3)
    path = tmp_path / "keys.jsonl"
    key = append_key(path, "ann", "dealer")
    ring = KeyRing(path=path)
    reads: list[Path] = []
    parses: list[str] = []
    read, parse = auth_module._read_text, auth_module.parse_keys

    def counted_read(file: Path) -> str:
        reads.append(file)
        return read(file)

    def counted_parse(text: str, **kwargs: Any) -> list[ApiKey]:
        parses.append(text)
        return parse(text, **kwargs)

    monkeypatch.setattr(auth_module, "_read_text", counted_read)
    monkeypatch.setattr(auth_module, "parse_keys", counted_parse)
    assert ring.find(key) is not None
    assert ring.find(key) is not None
    assert (len(reads), len(parses)) == (2, 0)  # read at each request; the same text not parsed
    time.sleep(0.35)
    assert ring.find(key) is not None  # its stamp the same for a while: read once more, then
    assert ring.find(key) is not None  # trusted
    assert len(reads) == 3
    # The file's own clock is not trusted: one set an hour ahead settles as any other.
    ahead = time.time() + 3600
    os.utime(path, (ahead, ahead))
    assert ring.find(key) is not None  # a new stamp: read
    time.sleep(0.35)
    for _ in range(3):  # read once more, then trusted
        assert ring.find(key) is not None
    assert len(reads) == 5
    # A refused edit is logged once while it settles, and a later edit refused alike again.
    with caplog.at_level(logging.ERROR, logger="pitboss.auth"):
        for edit in ("{not json\n", "{not json either\n"):
            with path.open("a") as keys:
                keys.write(edit)
            for _ in range(3):
                assert ring.find(key) is not None
        path.chmod(0o666)  # refused before it is read, at each read while it settles
        for _ in range(3):
            assert ring.find(key) is not None
    assert len([r for r in caplog.records if "keeping the previous keys" in r.getMessage()]) == 3


def test_a_key_file_read_half_written_does_not_become_what_a_refused_edit_keeps(tmp_path):
    # Rewritten in place (cp, a shell's >, an editor), a file was read truncated: no keys,
    # and a valid text. The edit then refused kept the keys of that read, none: everybody
    # was locked out, and the log said "keeping the previous keys the file still lists".
    clock = [1000.0]
    path = tmp_path / "keys.jsonl"
    keys = [append_key(path, name, "dealer") for name in ("ann", "bob")]
    ring = KeyRing(path=path, clock=lambda: clock[0])
    clock[0] += auth_module.KEY_FILE_SETTLED_S
    assert all(ring.find(key) for key in keys)  # settled: both accepted
    lines = path.read_text().splitlines(keepends=True)
    with path.open("w") as rewritten:  # truncated; a request lands before the text does
        assert ring.find(keys[0]) is None
        rewritten.write(lines[0] + lines[1].replace('"dealer"', '"croupier"'))
    for _ in range(2):  # refused at once, and once settled
        clock[0] += auth_module.KEY_FILE_SETTLED_S
        assert [ring.find(key) is not None for key in keys] == [True, True]


def test_a_key_in_force_but_not_yet_settled_is_kept_by_a_refused_edit_that_lists_it(tmp_path):
    # Created and used at once, bob was read from a text not yet settled; the file then
    # quiet, an edit refused later kept only the keys of the last settled text: bob was locked
    # out though the file still listed him, and the log said it kept the keys it lists.
    clock = [1000.0]
    path = tmp_path / "keys.jsonl"
    ann = append_key(path, "ann", "dealer")
    ring = KeyRing(path=path, clock=lambda: clock[0])
    clock[0] += auth_module.KEY_FILE_SETTLED_S
    assert ring.find(ann) is not None
    bob = append_key(path, "bob", "dealer")
    assert ring.find(bob) is not None
    clock[0] += 2 * auth_module.KEY_FILE_SETTLED_S
    with path.open("a") as keys:  # a typo in a new key's role
        keys.write(json.dumps({"name": "carol", "role": "delaer", "key_hash": "0" * 64}) + "\n")
    for _ in range(2):  # refused at once, and once settled
        assert [ring.find(key) is not None for key in (ann, bob)] == [True, True]
        clock[0] += auth_module.KEY_FILE_SETTLED_S
    revoked = [line for line in path.read_text().splitlines() if '"bob"' not in line]
    path.write_text("\n".join(revoked) + "\n")  # still refused: bob's revocation holds
    assert [ring.find(key) is not None for key in (ann, bob)] == [True, False]


def test_a_refused_key_file_is_said_so_again_when_the_reason_changes_and_once_each_time(
        tmp_path, caplog):
    # Mended by chmod but still not parsing, a file was refused without a word (its text was
    # the one already judged); a file that cannot be stat'ed was logged at every request.
    path = tmp_path / "keys.jsonl"
    key = append_key(path, "ann", "dealer")
    ring = KeyRing(path=path)
    with caplog.at_level(logging.ERROR, logger="pitboss.auth"):
        with path.open("a") as keys:
            keys.write("{bad\n")
        for mode in (0o600, 0o666, 0o600):
            path.chmod(mode)
            for _ in range(2):
                assert ring.find(key) is not None
        path.unlink()
        for _ in range(2):  # a loop, mended, and a loop again: said each time, once
            path.symlink_to(path)  # stat() fails with ELOOP
            for _ in range(3):
                ring.find(key)
            path.unlink()
            ring.find(key)  # no file: read as no keys
    said = [r.getMessage() for r in caplog.records if r.name == "pitboss.auth"]
    marks = ("is not JSON lines", "not trusted", "is not JSON lines", "symbolic links",
             "symbolic links")
    assert len(said) == len(marks), said
    assert all(mark in line for mark, line in zip(marks, said, strict=True)), said


def test_a_key_file_that_cannot_be_reached_again_is_said_so_again(tmp_path, caplog):
    # The way to the file broken, mended (the file as it was: the same stamp) and broken
    # again: the second break went unsaid.
    folder = tmp_path / "keys"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(folder)
    key = append_key(folder / "keys.jsonl", "ann", "dealer")
    ring = KeyRing(path=link / "keys.jsonl")
    with caplog.at_level(logging.ERROR, logger="pitboss.auth"):
        for _ in range(2):
            link.unlink()
            link.symlink_to(link)  # a loop on the way: stat() fails with ELOOP
            for _ in range(2):
                assert ring.find(key) is not None
            link.unlink()
            link.symlink_to(folder)
            assert ring.find(key) is not None
    said = [r.getMessage() for r in caplog.records if r.name == "pitboss.auth"]
    assert len(said) == 2, said


def ann_on_a_key_file(tmp_path: Path, database: Any) -> tuple[Path, Callable[[], Any]]:
    """A key file holding a cashier key for ann, an app reading it, and who that key is now."""
    path = tmp_path / "keys.jsonl"
    key = CliRunner().invoke(main, ["keys", "create", "--name", "ann", "--role", "cashier",
                                    "--file", str(path)]).stdout.strip()
    app = create_app({"DATABASE": database, "TESTING": True, "SHOE_KEY": b"k" * 32})
    app.extensions["pitboss.keys"] = keyring_from({"PITBOSS_KEYS_FILE": str(path)},
                                                  tmp_path / "unused")
    http = Http(app.test_client())
    return path, lambda: http.request("GET", "/whoami", role=None,
                                      headers={"Authorization": f"Bearer {key}"}).get_json()


def test_a_key_file_that_cannot_be_read_keeps_the_keys_it_had(tmp_path, database):
    path, whoami = ann_on_a_key_file(tmp_path, database)
    path.unlink()
    path.symlink_to(path)  # a loop: stat() fails with ELOOP, not "not found"
    assert whoami() == {"name": "ann", "role": "cashier"}


@pytest.mark.parametrize("edit", [
    b'{"name": "bob", "role": "auditor", "key_hash": null}\n',
    b'{"name": "b\xe9b", "role": "auditor", "key_hash": "' + b"0" * 64 + b'"}\n',
])
def test_a_bad_edit_of_the_key_file_keeps_the_keys_it_had(tmp_path, database, edit):
    # An operator's half-done edit locks nobody out and turns no request into a 500.
    path, whoami = ann_on_a_key_file(tmp_path, database)
    assert whoami() == {"name": "ann", "role": "cashier"}
    with path.open("ab") as keys:
        keys.write(edit)
    assert whoami() == {"name": "ann", "role": "cashier"}


def test_a_malformed_line_of_a_key_file_is_named_by_its_number() -> None:
    # Each line is read alone: every error said "line 1".
    good = '{"name": "a", "role": "dealer", "key_hash": "' + "0" * 64 + '"}'
    with pytest.raises(KeyConfigError, match=r"\(line 3\)$"):
        parse_keys(f"{good}\n\n{{broken\n", source="keys.jsonl")


@pytest.mark.parametrize("text", [
    '{"name": "a", "role": "croupier", "key_hash": "' + "0" * 64 + '"}',
    '{"name": "a", "role": "dealer", "key_hash": "abc"}',
    '{"name": " a", "role": "dealer", "key_hash": "' + "0" * 64 + '"}',
    '[{"name": "a", "role": "dealer"}]',
    "not json",
    '{"name": "a", "role": "dealer", "key_hash": null}',
    '{"name": "a", "role": ["dealer"], "key_hash": "' + "0" * 64 + '"}',
    "[" * 100_000,
    '{"name": "a", "role": "dealer", "key_hash": "' + "0" * 64 + '"}\n'
    '{"name": "a", "role": "auditor", "key_hash": "' + "1" * 64 + '"}',
    # One key under two names: the later one won, and revoking it made the key the other's.
    '{"name": "a", "role": "auditor", "key_hash": "' + "0" * 64 + '"}\n'
    '{"name": "b", "role": "manager", "key_hash": "' + "0" * 64 + '"}',
    # A member given twice was read as its last value: an auditor's record made a manager.
    '{"name": "a", "role": "auditor", "role": "manager", "key_hash": "' + "0" * 64 + '"}',
    '[{"name": "a", "role": "auditor", "role": "manager", "key_hash": "' + "0" * 64 + '"}]',
])
def test_a_malformed_key_file_is_refused_with_a_reason(text):
    # Naming the file it was read from (a bad role or key_hash did not).
    with pytest.raises(KeyConfigError, match=r"^/etc/pitboss/keys\.jsonl"):
        parse_keys(text, source="/etc/pitboss/keys.jsonl")


def test_keys_may_come_from_the_environment(tmp_path):
    inline = json.dumps([{"name": "eve", "role": "manager", "key_hash": hash_key("pbk_e")}])
    ring = keyring_from({"PITBOSS_KEYS": inline}, tmp_path / "absent.jsonl")
    found = ring.find("pbk_e")
    assert found is not None
    assert (found.name, found.role) == ("eve", "manager")
    assert ring.find("pbk_x") is None
    assert KeyRing().find("anything") is None


def test_one_holder_named_both_in_the_environment_and_the_file_is_refused(tmp_path):
    # alice in both, with other roles: the events named one actor for two holders, and
    # `keys revoke --name alice` left the environment's key working.
    path = tmp_path / "keys.jsonl"
    CliRunner().invoke(main, ["keys", "create", "--name", "alice", "--role", "auditor",
                              "--file", str(path)])
    inline = json.dumps([{"name": "alice", "role": "manager", "key_hash": hash_key("pbk_a")}])
    with pytest.raises(KeyConfigError, match=f"^PITBOSS_KEYS with {re.escape(str(path))} "
                                             r"names alice more than once: a name is one "
                                             r"holder's \(revoke or rename all but one\)$"):
        keyring_from({"PITBOSS_KEYS": inline, "PITBOSS_KEYS_FILE": str(path)}, path)


def test_a_revocation_holds_while_the_key_file_is_refused(tmp_path):
    # The file, refused for a name PITBOSS_KEYS holds too, kept every key it had: one revoked
    # meanwhile (keys revoke said "revoked") went on working.
    path = tmp_path / "keys.jsonl"
    bob, carol = append_key(path, "bob", "dealer"), append_key(path, "carol", "manager")
    inline = json.dumps([{"name": "alice", "role": "manager", "key_hash": hash_key("pbk_a")}])
    ring = keyring_from({"PITBOSS_KEYS": inline, "PITBOSS_KEYS_FILE": str(path)}, path)
    append_key(path, "alice", "auditor")  # refused beside PITBOSS_KEYS's alice
    whole = path.read_text()
    remove_keys(path, ["carol"])
    assert ring.find(carol) is None  # revoked
    assert ring.find(bob) is not None  # kept
    assert ring.find("pbk_a") is not None  # the environment's alice, not the file's
    # Listed again (an edit undone), carol is back: dropped from what was last accepted, not
    # from what a refused read left.
    path.write_text(whole)
    assert ring.find(carol) is not None
    # A file that says nothing of its keys (no records, a hash ill-written), or one another
    # user could have written, drops none on its word.
    for text, mode in (('{"keys": []}\n', 0o600), (whole.replace('"key_hash": "', '"key_hash": "X'),
                                                    0o600), ("", 0o666)):
        path.write_text(text)
        path.chmod(mode)
        assert ring.find(bob) is not None, text
        assert ring.find(carol) is not None, text


def test_keys_commands_know_the_holders_pitboss_keys_gives(tmp_path, monkeypatch):
    # keys list showed only the file; keys create made a second alice, which the server then
    # refused (keeping the keys it had); keys revoke said only "no key named alice".
    path = tmp_path / "keys.jsonl"
    monkeypatch.setenv("PITBOSS_KEYS", json.dumps(
        [{"name": "alice", "role": "manager", "key_hash": hash_key("pbk_a")}]))
    made = CliRunner().invoke(main, ["keys", "create", "--name", "bob", "--role", "auditor",
                                     "--file", str(path)])
    assert made.exit_code == 0, made.output
    twice = CliRunner().invoke(main, ["keys", "create", "--name", "alice", "--role", "auditor",
                                      "--file", str(path)])
    assert (twice.exit_code, twice.output) == (
        1, "Error: PITBOSS_KEYS already names alice: choose another name\n")
    listed = CliRunner().invoke(main, ["keys", "list", "--file", str(path)])
    assert listed.stdout == "bob\tauditor\nalice\tmanager\t(PITBOSS_KEYS)\n"
    revoked = CliRunner().invoke(main, ["keys", "revoke", "--name", "alice", "--file",
                                        str(path)])
    assert revoked.exit_code == 1
    assert revoked.output == (f"Error: no key named alice in {path}; alice in PITBOSS_KEYS, "
                              "which the service's environment sets: remove it there\n")
    # A file given an alice of its own by other means (keys create run without the service's
    # environment): listing it says the service refuses it.
    append_key(path, "alice", "auditor")
    warning = (f"warning: a service with this PITBOSS_KEYS refuses the key file: PITBOSS_KEYS "
               f"with {path} names alice more than once: a name is one holder's (revoke or "
               "rename all but one); it takes no key added to the file until then, and drops "
               "those removed\n")
    listed = CliRunner().invoke(main, ["keys", "list", "--file", str(path)])
    assert listed.stderr == warning
    made = CliRunner().invoke(main, ["keys", "create", "--name", "dave", "--role", "dealer",
                                     "--file", str(path)])
    assert made.stderr.startswith(warning)  # dave's key will not work until then
    revoked = CliRunner().invoke(main, ["keys", "revoke", "--name", "dave", "--file",
                                        str(path)])
    assert revoked.stderr == warning


def test_a_key_file_others_may_write_is_refused_and_its_new_keys_not_taken(tmp_path):
    # Anyone who may write the file may add a manager's key of their own.
    path = tmp_path / "keys.jsonl"
    key = append_key(path, "ann", "cashier")
    env = {"PITBOSS_KEYS_FILE": str(path)}
    ring = keyring_from(env, path)
    path.chmod(0o646)
    with path.open("a") as keys:
        keys.write(json.dumps({"name": "bob", "role": "manager",
                               "key_hash": hash_key("pbk_bob")}) + "\n")
    assert ring.find("pbk_bob") is None  # running: it keeps the keys it had
    assert ring.find(key) is not None
    with pytest.raises(KeyConfigError, match=r"^the key file is not trusted: .* may be written "
                                             r"by any user \(mode 646\): chmod o-w it$"):
        keyring_from(env, path)  # starting
    # Mended as the message says, it is read again (a chmod moves no mtime nor size): bob was
    # refused until the next edit.
    path.chmod(0o640)
    assert ring.find("pbk_bob") is not None
    # Writable by a group of the service's own (a private group under umask 002, a volume's
    # fsGroup): taken.
    path.chmod(0o660)
    assert keyring_from(env, path).find("pbk_bob") is not None


def test_a_key_file_a_group_not_the_services_may_write_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "keys.jsonl"
    append_key(path, "ann", "cashier")
    path.chmod(0o660)
    group = path.stat().st_gid
    # The service as a user outside the file's group (giving the file away takes root).
    monkeypatch.setattr("api.secrets_files.os.getegid", lambda: group + 1)
    monkeypatch.setattr("api.secrets_files.os.getgroups", lambda: [group + 1])
    with pytest.raises(KeyConfigError, match=f"may be written by group {group}, which the user "
                                             r"this service runs as is not in \(mode 660\): "
                                             r"chmod g-w it$"):
        keyring_from({"PITBOSS_KEYS_FILE": str(path)}, path)


def test_a_shoe_key_file_others_may_write_or_another_user_owns_is_refused(tmp_path, caplog):
    path = tmp_path / "shoe.key"
    key = load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)})
    path.chmod(0o602)
    with pytest.raises(ShoeKeyError, match=r"may be written by any user \(mode 602\)"):
        load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)})
    path.chmod(0o620)  # the service's own group, which cannot read it: no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pitboss.keys"):
        assert load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)}) == key
        assert not caplog.records
        path.chmod(0o640)
        assert load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)}) == key
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.endswith("is readable by others (mode 640): let only the user this service "
                         "runs as read it")
    path.chmod(0o600)
    path.write_bytes(b"\xff\xfe")  # no text: said so, not a traceback
    with pytest.raises(ShoeKeyError, match="must hold 64 hex digits \\(it holds bytes other "
                                           "than ASCII\\)"):
        load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)})
    path.write_text(key.hex())
    if os.geteuid() != 0:
        return  # only root can give the file away
    os.chown(path, 65534, -1)
    with pytest.raises(ShoeKeyError, match="belongs to user 65534, neither the user this "
                                           "service runs as nor root: chown it to one of them"):
        load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)})


def test_the_shoe_key_file_is_created_once_with_mode_600(tmp_path):
    env = {"PITBOSS_DATA_DIR": str(tmp_path / "pgdata")}
    key = load_shoe_key(env)
    path = tmp_path / "shoe.key"
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_shoe_key(env) == key
    assert load_shoe_key({"PITBOSS_SHOE_KEY_FILE": str(path)}) == key


def test_the_shoe_key_is_not_created_for_an_external_database_unless_allowed(tmp_path):
    env = {"DATABASE_URL": "postgresql://u@db/x", "PITBOSS_SHOE_KEY_FILE": str(tmp_path / "k")}
    with pytest.raises(ShoeKeyError, match="PITBOSS_SHOE_KEY_CREATE"):
        load_shoe_key(env)
    assert not (tmp_path / "k").exists()
    assert len(load_shoe_key({**env, "PITBOSS_SHOE_KEY_CREATE": "yes"})) == 32


def test_the_shoe_key_may_come_from_the_environment_as_hex():
    key = ShoeSealer.new_key()
    assert load_shoe_key({"PITBOSS_SHOE_KEY": key.hex()}) == key
    with pytest.raises(ShoeKeyError, match="64 hex digits"):
        load_shoe_key({"PITBOSS_SHOE_KEY": "abc"})


def _must_not_start(*_: object) -> None:
    raise AssertionError("serve went on to start gunicorn")


def test_serve_refuses_to_start_without_a_shoe_key_for_an_external_database(
        tmp_path, database, monkeypatch, unused_port):
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("PITBOSS_SHOE_KEY_FILE", str(tmp_path / "missing.key"))
    monkeypatch.delenv("PITBOSS_SHOE_KEY", raising=False)
    monkeypatch.delenv("PITBOSS_SHOE_KEY_CREATE", raising=False)
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert "no shoe key" in result.output


def test_serve_refuses_to_start_with_a_swagger_ui_mirror_that_is_no_url(database, monkeypatch,
                                                                        unused_port):
    # Refused by every worker instead, after "serving on".
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("PITBOSS_SWAGGER_UI_URL", "mirror.casino/swagger")
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: PITBOSS_SWAGGER_UI_URL is an http(s) URL or a path")


@pytest.mark.parametrize("keys", ["not json", '[{"name": "ann", "role": "croupier"}]'])
def test_serve_refuses_to_start_with_keys_it_cannot_read(database, monkeypatch, keys,
                                                         unused_port):
    # Found by the workers instead, after "serving on", each dying with a traceback.
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("PITBOSS_KEYS", keys)
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert "PITBOSS_KEYS" in result.output
    assert "serving on" not in result.output


def test_serve_refuses_to_start_with_a_key_that_does_not_open_the_live_shoe(
        postgres_env, database, monkeypatch, unused_port):
    env = postgres_env()
    sealed_with = ShoeSealer.new_key()
    ledger = GameLedger(env=env, shoe_key=sealed_with)
    table = ledger.open_table("t", "boss", "T1", CASINO)
    ledger.start_round("r", "dealer", table)  # a live shoe, sealed with the right key
    other = ledger.open_table("t2", "boss", "T2", CASINO)  # and a newer one, retired
    ledger.void("v", "boss", ledger.start_round("r2", "dealer", other), "closing early")
    ledger.close_table("c", "boss", other, "closing early")
    ledger.close()
    assert prepare_store(env, sealed_with) > 0
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    monkeypatch.setenv("PITBOSS_SHOE_KEY", ShoeSealer.new_key().hex())
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert "does not open the newest live shoe" in result.output
    assert "PITBOSS_SHOE_KEY" in result.output


def test_shoes_sealed_with_a_lost_key_are_abandoned_and_play_goes_on_under_a_new_one(
        postgres_env, database, monkeypatch):
    # With the key lost, the service did not start, closing the table or dealing on answered
    # 500, and no way led to a new shoe, though the README said to start one.
    env = postgres_env()
    lost = ShoeSealer.new_key()
    ledger = GameLedger(env=env, shoe_key=lost, randbelow=SteeredShuffle("9H 9S 7C 5D 5S"))
    in_play = ledger.open_table("t1", "boss", "T1", CASINO)
    ledger.open_account("a", "cashier", "ann")
    ledger.buy_in("b", "cashier", "ann", 1_000)
    round_id = ledger.start_round("r1", "dealer", in_play)
    for box in (1, 2):  # alone, she plays two boxes (R-C8)
        ledger.place_stake(f"s{box}", "dealer", round_id, "ann", box, 100)
    ledger.deal("d", "dealer", round_id)  # ann holds 14 twice against a 7: her turn
    idle = ledger.open_table("t2", "boss", "T2", CASINO)
    ledger.void("v", "boss", ledger.start_round("r2", "dealer", idle), "no players")
    closed = ledger.open_table("t3", "boss", "T3", CASINO)
    ledger.void("v3", "boss", ledger.start_round("r3", "dealer", closed), "no players")
    ledger.close_table("c", "boss", closed, "closing early")  # its shoe revealed, retired
    lost_shoes = [UUID(ledger.table(t)["shoe_id"]) for t in (in_play, idle)]
    ledger.close()
    new = ShoeSealer.new_key()
    with pytest.raises(ShoeKeyError, match=r"pitboss shoes abandon"):
        prepare_store(env, new)
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    monkeypatch.setenv("PITBOSS_SHOE_KEY", new.hex())
    command = ["shoes", "abandon", "--reason", "shoe key lost", "--by", "night manager"]

    listed = CliRunner().invoke(main, command)
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines() == [
        f"shoe {lost_shoes[1]} (table T2, shoe 1, 0 of 312 cards dealt) does not open with "
        "this key",
        f"shoe {lost_shoes[0]} (table T1, shoe 1, 5 of 312 cards dealt; round {round_id} in "
        "play there) does not open with this key",
        "2 live shoe(s) the shoe key does not open: name those to abandon"]
    with pytest.raises(ShoeKeyError):  # nothing abandoned yet
        prepare_store(env, new)

    # Named twice, a shoe is abandoned once, and that is no failure.
    abandoned = CliRunner().invoke(main, [*command, *map(str, lost_shoes), str(lost_shoes[1])])
    assert abandoned.exit_code == 0, abandoned.output
    assert abandoned.output.splitlines()[-2:] == [
        f"shoe {lost_shoes[0]} abandoned: a manager voids round {round_id} (POST "
        f"/rounds/{round_id}/void)",
        f"shoe {lost_shoes[1]} abandoned"]
    assert prepare_store(env, new) > 0  # the service starts
    again = CliRunner().invoke(main, [*command, str(lost_shoes[0])])
    assert again.exit_code == 1
    assert f"shoe {lost_shoes[0]} not abandoned: Shoe {lost_shoes[0]} is retired already " \
           "(shoe key lost). (R-H2)" in again.output

    ledger = GameLedger(env=env, shoe_key=new)
    try:
        # The round records it, offers only its void, and takes no card or decision.
        state = ledger.round_state(round_id)
        assert [x["decision"] for x in state["legal"]] == ["void"]
        assert ledger.round_events(round_id)[-1]["type"] == "ShoeAbandoned"
        for decision in ("hit", "stand"):
            with pytest.raises(DealRefused, match=r"The round's shoe was abandoned \(shoe key "
                                                  r"lost\): .* a manager voids it") as no:
                getattr(ledger, decision)(f"{decision}-1", "ann", round_id, "ann", 1, 0)
            assert no.value.rule == "R-V1"
        ledger.void("v2", "boss", round_id, "its shoe was abandoned")
        assert ledger.check_round(round_id) == []  # the abandonment replays as recorded
        assert ledger.balance("ann")["available"] == 1_000
        for table in (in_play, idle):
            fresh = ledger.start_round(f"again-{table}", "dealer", table)
            assert ledger.round_state(fresh)["shoe_id"] not in map(str, lost_shoes)
        shoe = ledger.shoe(lost_shoes[0])
        assert (shoe["retired"], shoe["abandoned"], shoe["retired_reason"]) == (
            True, True, "shoe key lost")
        assert "order" not in shoe
        assert "verified" not in shoe
        assert ledger.verify_shoe(lost_shoes[0]) == [
            "the shoe was abandoned unrevealed (shoe key lost), the key that sealed it lost: "
            "its cards cannot be checked against its commitment"]
        assert ledger.check_round(round_id) == []
        new_shoe = UUID(ledger.table(idle)["shoe_id"])
        with pytest.raises(ShoeKept, match=r"The shoe key opens shoe .*retires revealed"):
            ledger.abandon_shoe("a2", "night manager", new_shoe, "shoe key lost")
    finally:
        ledger.close()
    app = create_app({"DATABASE": database, "EVENTSOURCING_ENV": env, "SHOE_KEY": new,
                      "API_KEYS": [ApiKey(name="audit", role="auditor",
                                          key_hash=hash_key(KEYS["auditor"]))],
                      "TESTING": True})
    try:
        http = Http(app.test_client())
        assert http.ok(http.get(f"/audit/shoes/{lost_shoes[0]}")) == shoe
        assert http.ok(http.get(f"/audit/shoes/{lost_shoes[0]}/verification"))["ok"] is False
    finally:
        app.extensions["pitboss"].close()


def test_a_shoe_key_file_made_for_a_database_with_live_shoes_is_not_left_behind(
        postgres_env, database, monkeypatch, tmp_path, unused_port):
    # Made, then refused: the wrong key stayed on disk and stopped every later start.
    env = postgres_env()
    ledger = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    ledger.start_round("r", "dealer", ledger.open_table("t", "boss", "T1", CASINO))
    ledger.close()
    key_file = tmp_path / "shoe.key"
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    monkeypatch.delenv("PITBOSS_SHOE_KEY", raising=False)
    monkeypatch.setenv("PITBOSS_SHOE_KEY_FILE", str(key_file))
    monkeypatch.setenv("PITBOSS_SHOE_KEY_CREATE", "yes")
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1, result.output
    assert "does not open the newest live shoe" in result.output
    assert f"(the key file {key_file} made for this start was removed)" in result.output
    assert not key_file.exists()


def test_serve_refuses_to_start_in_a_sentence_when_the_live_shoe_does_not_read_back(
        postgres_env, database, monkeypatch, unused_port):
    env = postgres_env()
    key = ShoeSealer.new_key()
    ledger = GameLedger(env=env, shoe_key=key)
    ledger.start_round("r", "dealer", ledger.open_table("t", "boss", "T1", CASINO))
    ledger.close()
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:  # as its owner may
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        conn.execute(f"UPDATE {table} SET state = convert_to(regexp_replace(convert_from("
                     "state, 'UTF8'), '\"cut\":[0-9]+', '\"cut\":\"x\"'), 'UTF8') "
                     "WHERE topic = 'pitboss:Shoe.Created'")
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    monkeypatch.setenv("PITBOSS_SHOE_KEY", key.hex())
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.startswith("Error: the record does not read back: the stored event ")
    assert 'the field cut holds "x", not a whole number; `pitboss chain` shows' in result.output


def test_a_reader_that_goes_away_ends_a_listing_quietly(tmp_path):
    # `pitboss replay ... | head` ended in "Error: [Errno 32] Broken pipe".
    import subprocess
    import sys

    keys = tmp_path / "keys.jsonl"
    keys.write_text("".join(json.dumps({"name": f"holder-{n:05}", "role": "auditor",
                                        "key_hash": hash_key(f"key-{n}")}) + "\n"
                            for n in range(5_000)))
    lister = subprocess.Popen([sys.executable, "-m", "api.cli", "keys", "list", "--file",
                               str(keys)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert lister.stdout is not None
    assert lister.stdout.readline().startswith(b"holder-")
    lister.stdout.close()  # as head does, after its lines
    _, err = lister.communicate(timeout=60)
    assert err == b"", err
    assert lister.returncode == 1


def test_the_demo_refuses_a_database_not_its_own_unless_told(tmp_path, monkeypatch,
                                                            unused_port):
    # With a service's DATABASE_URL exported it played demo buy-ins into that ledger for good
    # and added a demo manager's key to that service's key file.
    keys = tmp_path / "keys.jsonl"
    monkeypatch.setenv("PITBOSS_KEYS_FILE", str(keys))
    monkeypatch.setenv("DATABASE_URL", "postgresql://svc@db.example:5433/pitboss")
    result = CliRunner().invoke(main, ["demo", "--port", str(unused_port)])
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: the demo plays rounds with demo buy-ins into its database and adds demo keys (a "
        "manager's among them) to its key file, and DATABASE_URL or POSTGRES_HOST names "
        "db.example:5433/pitboss: unset them to run on the embedded database, or give "
        "--external-database to run the demo there\n")
    assert not keys.exists()


def test_the_demo_refuses_a_pitboss_keys_naming_its_holders(tmp_path, monkeypatch,
                                                            unused_port):
    # Its server refused the key file beside PITBOSS_KEYS (one holder per name) and stopped:
    # "the API server did not start", after the demo keys were written.
    keys = tmp_path / "keys.jsonl"
    monkeypatch.setenv("PITBOSS_KEYS_FILE", str(keys))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PITBOSS_KEYS", json.dumps(
        [{"name": "demo-dealer", "role": "dealer", "key_hash": hash_key("pbk_d")},
         {"name": "demo-manager", "role": "manager", "key_hash": hash_key("pbk_m")}]))
    result = CliRunner().invoke(main, ["demo", "--port", str(unused_port)])
    assert result.exit_code == 1, result.output
    assert result.output == ("Error: PITBOSS_KEYS names demo-dealer, demo-manager, names the "
                             "demo gives its own keys: remove them there, or unset "
                             "PITBOSS_KEYS\n")
    assert not keys.exists()


def test_demo_and_serve_refuse_a_port_in_use_before_touching_anything(tmp_path, monkeypatch,
                                                                      unused_port):
    # Another server's health check answered for the demo, which printed its banner and
    # replaced the demo keys, then failed to bind.
    keys = tmp_path / "keys.jsonl"
    monkeypatch.setenv("PITBOSS_KEYS_FILE", str(keys))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", unused_port))
        busy.listen()
        for command in ("demo", "serve"):
            result = CliRunner().invoke(main, [command, "--port", str(unused_port)])
            assert result.exit_code == 1, result.output
            assert result.output.startswith(
                f"Error: cannot serve on 127.0.0.1:{unused_port}: Address already in use")
    assert not keys.exists()  # no demo key written
    unknown = CliRunner().invoke(main, ["serve", "--host", "nowhere.invalid"])
    assert unknown.exit_code == 1, unknown.output
    assert unknown.output.startswith("Error: cannot serve on nowhere.invalid: ")
    assert "another" not in unknown.output
    elsewhere = CliRunner().invoke(main, ["serve", "--host", "192.0.2.1"])  # TEST-NET-1
    assert elsewhere.output.endswith("(no network interface of this machine has that "
                                     "address)\n"), elsewhere.output
    empty = CliRunner().invoke(main, ["serve", "--host", " "])
    assert empty.output == "Error: the host to serve on is empty (--host, PITBOSS_HOST)\n"
    # An IPv6 address, bracketed or not, is checked (and given to gunicorn) bracketed once.
    with socket.socket(socket.AF_INET6) as busy:
        busy.bind(("::1", unused_port))
        busy.listen()
        for host in ("::1", "[::1]"):
            result = CliRunner().invoke(main, ["serve", "--host", host, "--port",
                                               str(unused_port)])
            assert result.output.startswith(
                f"Error: cannot serve on [::1]:{unused_port}: Address already in use"), \
                result.output
    assert gunicorn_argv(host="::1", port=80, workers=1, threads=1, config_file=None)[4] == \
        "[::1]:80"


@pytest.mark.parametrize("variable", ["GUNICORN_TIMEOUT_S", "PITBOSS_READ_TIMEOUT_S"])
@pytest.mark.parametrize("timeout", ["abc", "0", "-5", "1e2", "3601"])
def test_serve_refuses_a_gunicorn_timeout_that_is_no_number_of_seconds(monkeypatch, unused_port,
                                                                      variable, timeout):
    # gunicorn said "serving on", then failed to read its configuration, with a traceback.
    monkeypatch.setenv(variable, timeout)
    for command in ("demo", "serve"):
        result = CliRunner().invoke(main, [command, "--port", str(unused_port)])
        assert result.exit_code == 1, result.output
        assert result.output == (f"Error: {variable} is a whole number of seconds from "
                                 f"1 to 3600, not {timeout!r}\n")


# --- over real HTTP --------------------------------------------------------------------------


@pytest.fixture
def served(make_app) -> Iterator[tuple[str, object]]:
    app = make_app()
    server = make_server("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join()


@pytest.mark.parametrize("preset", ["casino", "wild21", "casino_wild"])
def test_simulate_plays_rounds_to_their_settlement_through_the_api(served, preset):
    url, app = served
    result = CliRunner().invoke(main, ["simulate", "--tables", "1", "--rounds", "3",
                                       "--preset", preset, "--url", url,
                                       "--key", KEYS["dealer"], "--key", KEYS["cashier"]])
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[-1]
    assert ": 3 rounds, last " in line
    # Off a terminal, progress comes in lines (a bar would show nothing until the end).
    label = f"{preset}: 1 table(s) x 3 rounds"
    lines = result.stderr.splitlines()
    assert (lines[0], lines[-1]) == (f"{label}: 0 of 3", f"{label}: 3 of 3 (100%)")
    assert len(set(lines)) == len(lines)  # each tenth once
    round_id = line.rsplit(" ", 1)[-1]
    http = Http(app.test_client())
    state = http.ok(http.get(f"/rounds/{round_id}"))
    assert state["phase"] in ("settled", "voided")
    assert http.ok(http.get(f"/audit/rounds/{round_id}/check"))["ok"]
    events = http.ok(http.get(f"/audit/rounds/{round_id}/events"))
    assert {e["actor"] for e in events} == {NAMES["dealer"]}

    replayed = CliRunner().invoke(main, ["replay", round_id, "--url", url,
                                         "--key", KEYS["auditor"]])
    assert replayed.exit_code == 0, replayed.output
    assert "round 1 opens" not in replayed.stdout
    assert "round 3 opens" in replayed.stdout
    # Named, as a printout filed away must be: the table by the name the auditor knows.
    table = state["table_id"]
    assert replayed.stdout.startswith(f"round {round_id}: round 3 at table ")
    assert f"({table})\n" in replayed.stdout.splitlines(keepends=True)[0]
    assert "round settled" in replayed.stdout or "round voided" in replayed.stdout
    assert any(s in replayed.stdout for s in "♠♥♦♣")


def _simulate_interrupted(url: str, monkeypatch: pytest.MonkeyPatch, *, times: int) -> Any:
    """``simulate`` of 2 tables x 200 rounds, Ctrl-C pressed ``times`` times once a round is
    done; the CliRunner's result."""
    real_progress = cli._progress
    told: list[int] = []

    @contextlib.contextmanager
    def interrupted(length: int, label: str, **kwargs: Any) -> Iterator[Any]:
        with real_progress(length, label, **kwargs) as reached:
            def tell(done: int) -> None:
                if done >= 1 and len(told) < times:
                    told.append(done)
                    raise KeyboardInterrupt
                reached(done)
            yield tell

    monkeypatch.setattr(cli, "_progress", interrupted)
    return CliRunner().invoke(main, ["simulate", "--tables", "2", "--rounds", "200",
                                     "--url", url,
                                     "--key", KEYS["dealer"], "--key", KEYS["cashier"]])


def test_simulate_stopped_finishes_each_tables_round_and_names_the_tables(served, monkeypatch):
    # Ctrl-C left a round open with its chips held, and the tables played went unnamed.
    url, app = served
    result = _simulate_interrupted(url, monkeypatch, times=1)
    assert result.exit_code == 130, result.output
    assert "stopping: each table finishes the round in play" in result.stderr
    tables = re.findall(r"^table \S+ \(([0-9a-f-]+)\): (\d+) rounds?, last (\S+)$",
                        result.stdout, re.M)
    assert len(tables) == 2
    http = Http(app.test_client())
    assert sum(int(played) for _, played, _ in tables) >= 1
    for _, played, last in tables:
        assert int(played) < 200
        if last != "-":  # (a table stopped before its first round has none)
            round_ = http.ok(http.get(f"/rounds/{last}", role="auditor"))
            assert round_["phase"] in ("settled", "voided"), round_["phase"]


def test_simulate_whose_api_goes_away_names_the_rounds_it_left_in_play(make_app, monkeypatch):
    # It said only "the API ... does not answer": the rounds it left open, with chips held,
    # were found by searching every open round.
    app = make_app()
    server = make_server("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setattr(client_module, "RECONNECT_WINDOW_S", 1.0)  # the wait for a restart
    real_progress = cli._progress

    @contextlib.contextmanager
    def server_gone_after_a_round(length: int, label: str, **kwargs: Any) -> Iterator[Any]:
        with real_progress(length, label, **kwargs) as reached:
            def tell(done: int) -> None:
                if done >= 1 and thread.is_alive():
                    server.shutdown()
                    server.server_close()  # refused from now on
                reached(done)
            yield tell

    monkeypatch.setattr(cli, "_progress", server_gone_after_a_round)
    result = CliRunner().invoke(main, ["simulate", "--tables", "3", "--rounds", "200",
                                       "--url", url,
                                       "--key", KEYS["dealer"], "--key", KEYS["cashier"]])
    assert result.exit_code == 1, result.output
    # Each table left a round in play, a round start unanswered (the API went away while it
    # was sent), or nothing (between rounds).
    tables = re.findall(r"^table \S+ \(\S+\): \d+ rounds?, last \S+(?: \(left in play: "
                        r"(?:round (\S+)|(a round whose start went unanswered), .*)\))?$",
                        result.stdout, re.M)
    assert len(tables) == 3, result.stdout
    rounds = [round_id for round_id, _ in tables if round_id]
    left = [t for t in tables if any(t)]
    assert left, result.stdout
    assert f"{len(left)} round" in result.stderr
    assert "left in play (named above)" in result.stderr
    http = Http(app.test_client())
    for round_id in rounds:
        assert http.ok(http.get(f"/rounds/{round_id}"))["phase"] not in ("settled", "voided")


def test_simulate_names_a_round_whose_start_went_unanswered(served, monkeypatch):
    # The round was recorded, its answer lost: simulate named the round before it, settled.
    url, app = served
    real_post = client_module.Client.post
    starts: list[str] = []

    def post(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        answer = real_post(self, path, *args, **kwargs)
        if path.endswith("/rounds"):
            starts.append(path)
            if len(starts) == 2:  # recorded; its answer lost, and the API gone meanwhile
                raise client_module.Unreachable("the API does not answer: test")
        return answer

    monkeypatch.setattr(client_module.Client, "post", post)
    result = CliRunner().invoke(main, ["simulate", "--tables", "1", "--rounds", "5",
                                       "--url", url,
                                       "--key", KEYS["dealer"], "--key", KEYS["cashier"]])
    assert result.exit_code == 1, result.output
    (table_id,) = re.findall(r"^table \S+ \((\S+)\): 1 round, last \S+ \(left in play: a round "
                             r"whose start went unanswered, if it started \(GET /tables/(\S+) "
                             r"names it as current_round_id\)\)$", result.stdout, re.M)
    assert table_id[0] == table_id[1]
    assert "1 round left in play (named above)" in result.stderr
    http = Http(app.test_client())
    current = http.ok(http.get(f"/tables/{table_id[0]}"))["current_round_id"]
    assert http.ok(http.get(f"/rounds/{current}"))["phase"] == "betting"


def test_simulate_left_at_once_by_a_second_ctrl_c_names_what_it_left_in_play(served,
                                                                            monkeypatch):
    # A second Ctrl-C (the natural answer to a wait for the API) printed only "Aborted!".
    url, _ = served
    result = _simulate_interrupted(url, monkeypatch, times=2)
    assert result.exit_code == 130, result.output
    assert len(re.findall(r"^table \S+ \(\S+\): \d+ rounds?, last \S+", result.stdout,
                          re.M)) == 2, result.stdout


def test_simulate_takes_its_keys_from_the_environment(served):
    # As README shows it: keys on the command line are in the process list for all to see.
    url, _ = served
    result = CliRunner().invoke(main, ["simulate", "--tables", "1", "--rounds", "1", "--url",
                                       url],
                                env={"PITBOSS_API_KEYS": f"{KEYS['dealer']} {KEYS['cashier']}"})
    assert result.exit_code == 0, result.output
    assert ": 1 round, last " in result.stdout


def test_simulate_needs_a_dealer_and_a_cashier_key(served):
    url, _ = served
    result = CliRunner().invoke(main, ["simulate", "--url", url, "--key", KEYS["auditor"]])
    assert result.exit_code == 1
    assert "needs a dealer and a cashier key" in result.output


def test_a_command_stopped_by_the_statement_timeout_says_what_it_waited_on(make_app, database,
                                                                            monkeypatch):
    # It printed PostgreSQL's own "canceling statement due to statement timeout", naming
    # neither the lock nor the setting.
    app = make_app()
    schema = app.extensions["pitboss"].env["POSTGRES_SCHEMA"]
    app.extensions["pitboss"].ledger()  # the tables exist
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    monkeypatch.setenv("POSTGRES_STATEMENT_TIMEOUT", "1")
    with psycopg.connect(database.conninfo()) as operator:
        operator.execute(f'LOCK TABLE "{schema}".ledger_events IN ACCESS EXCLUSIVE MODE')
        result = CliRunner().invoke(main, ["replay", str(uuid.uuid4())])
        operator.rollback()
    assert result.exit_code == 1, result.output
    assert "ran past POSTGRES_STATEMENT_TIMEOUT" in result.output, result.output
    assert "VACUUM FULL or ALTER TABLE" in result.output


def test_replay_reads_the_database_directly(make_app, database, monkeypatch):
    app = make_app()
    http = Http(app.test_client())
    from tests.e2e.conftest import Desk

    desk = Desk(http)
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=10)
    desk.do("stakes", bettor="P2", box=2, amount=10)
    desk.do("deal")
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", app.extensions["pitboss"].env["POSTGRES_SCHEMA"])
    result = CliRunner().invoke(main, ["replay", r])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # Which round, table and shoe, when, under which rules and limits: a printout filed in a
    # dispute folder said only "round 8 opens under casino v1", with times of no day or zone.
    state = http.ok(http.get(f"/rounds/{r}"))
    opened = http.ok(http.get(f"/audit/rounds/{r}/events"))[0]
    assert lines[:4] == [
        f"round {r}: round 1 at table T1 ({desk.table})",
        f"opened {opened['timestamp'][:10]} {opened['timestamp'][11:19]} UTC (every time "
        f"below is UTC); shoe {state['shoe_id']}, its positions counted from 0",
        f"rules casino v1, content hash {state['rules_hash']}",
        "limits in EUR minor units: table minimum 10, maximum 1000, minimum chip 5, minimum "
        "unit 1; 7 boxes"]
    assert lines[4].startswith("v1 ")
    assert "P1 stakes 10 on box 1" in result.stdout
    assert "betting closes: P1, P2" in result.stdout
    assert "dealer-terminal" in lines[4]
    missing = CliRunner().invoke(main, ["replay", "00000000-0000-0000-0000-000000000001"])
    assert missing.exit_code == 1
    assert "no round" in missing.output

    undecodable(app.extensions["pitboss"].ledger(), UUID(r))  # appended around the ledger
    altered = CliRunner().invoke(main, ["replay", r])
    assert altered.exit_code == 1
    assert altered.output.startswith(f"Error: the record of round {r} does not replay (the "
                                     "stored event ")
    assert "pitboss chain" in altered.output


@pytest.mark.parametrize(("gone", "kept_head", "status"), [
    ("stdout", None, CHAIN_NOT_WALKED_EXIT), ("stderr", None, CHAIN_NOT_WALKED_EXIT),
    ("stdout", "f" * 64, 1)])
def test_a_chain_walk_whose_reader_went_away_was_not_walked_unless_it_found_an_alteration(
        database, postgres_env, tmp_path, gone, kept_head, status):
    # It exited 1, which an alarm reads as an altered record, on an intact one; and 3 on an
    # altered one, whose finding stands however the reader left.
    import subprocess
    import sys

    env = postgres_env()
    ledger = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    ledger.open_account("a", "cashier", "P1")
    ledger.close()
    argv = ["chain"] + ([] if kept_head is None else ["--expected-head", kept_head])
    with open(tmp_path / "kept", "w") as kept:
        walker = subprocess.Popen(
            [sys.executable, "-m", "api.cli", *argv],
            env={**_command_env(database, postgres_env, tmp_path),
                 "POSTGRES_SCHEMA": env["POSTGRES_SCHEMA"]},
            stdout=subprocess.PIPE if gone == "stdout" else kept,
            stderr=subprocess.PIPE if gone == "stderr" else kept)
        stream = walker.stdout if gone == "stdout" else walker.stderr
        assert stream is not None
        stream.close()  # gone before the walk says what it found
        walker.wait(timeout=60)
    assert walker.returncode == status, (tmp_path / "kept").read_text()
    assert "Broken pipe" not in (tmp_path / "kept").read_text()


def test_a_chain_walk_with_standard_error_closed_walks(database, postgres_env, tmp_path):
    # Started with 2>&-, it never walked: the progress asked None whether it was a terminal.
    import os
    import subprocess
    import sys

    env = postgres_env()
    GameLedger(env=env, shoe_key=ShoeSealer.new_key()).close()
    walked = subprocess.run(
        [sys.executable, "-m", "api.cli", "chain"],
        env={**_command_env(database, postgres_env, tmp_path),
             "POSTGRES_SCHEMA": env["POSTGRES_SCHEMA"]},
        stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2), timeout=60, check=False)
    assert walked.returncode == 0, walked.stdout
    assert walked.stdout.decode().endswith("intact\n")


def test_output_is_gone_only_once_its_reader_has_closed(monkeypatch):
    # A broken pipe from a connection (the API's) was taken for the reader's, and hidden.
    import os
    import sys

    from api.cli import _reader_gone

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        assert not _reader_gone()
        os.close(read_end)
        assert _reader_gone()


def test_a_connections_broken_pipe_is_an_error_said_so(monkeypatch, unused_port):
    # It ended the command with status 1 and not a word, as if a reader had gone.
    from api.client import Client

    def broken(*_: object, **__: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(Client, "get", broken)
    result = CliRunner().invoke(main, ["replay", str(uuid.uuid4()), "--url",
                                       f"http://127.0.0.1:{unused_port}", "--key", "k"])
    assert result.exit_code == 1
    assert result.output == "Error: [Errno 32] Broken pipe\n"


def test_the_chain_command_walks_the_database_and_fails_on_another_head(
        make_app, database, monkeypatch):
    app = make_app()
    http = Http(app.test_client())
    from tests.e2e.conftest import Desk

    Desk(http).round()
    head = http.ok(http.get("/audit/chain/head", role="auditor"))
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", app.extensions["pitboss"].env["POSTGRES_SCHEMA"])
    result = CliRunner().invoke(main, ["chain", "--expected-head", head["head"]])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (f"walking the chain: {head['notification_id']:,} "
                                              f"of {head['notification_id']:,} (100%)")
    assert f"up to notification {head['notification_id']}; head {head['head']}" in result.stdout
    intact = (f"intact: the link at notification {head['notification_id']} is the one kept "
              "outside (the record up to it is as it was when the head was kept)\n")
    assert result.stdout.endswith(intact)
    # Events recorded since the head was kept are no alteration (they were called one).
    http.ok(http.post("/accounts", {"player": "late"}, role="cashier"), 201)
    later = CliRunner().invoke(main, ["chain", "--expected-head", head["head"]])
    assert later.exit_code == 0, later.output
    assert later.stdout.endswith(intact)
    walked = http.ok(http.get("/audit/chain", role="auditor", expected_head=head["head"]))
    assert (walked["intact"], walked["kept_head_checked"], walked["kept_head_at"]) == (
        True, True, head["notification_id"])
    # The head of the empty ledger, as /audit/chain/head gave it, is the genesis link.
    empty = CliRunner().invoke(main, ["chain", "--expected-head", "0" * 64])
    assert empty.exit_code == 0, empty.output
    assert empty.stdout.endswith("intact: the link at notification 0 is the one kept outside "
                                 "(the record up to it is as it was when the head was kept)\n")
    other = "f" * 64
    for part_rows in (10_000, 2):  # in one part, and in parts none of which found it
        monkeypatch.setattr("api.cli.CHAIN_PART_ROWS", part_rows)
        moved = CliRunner().invoke(main, ["chain", "--expected-head", other])
        assert moved.exit_code == 1
        assert f"BROKEN: no link the walk carried is the head {other} kept outside: the " \
               "record was altered since it was kept (or it was kept of another ledger)" \
               in moved.stdout
    # Over the API, a part begun past the first event that does not carry it says nothing of
    # it: an earlier part may have, and a walk passing it on called that an alteration.
    now = http.ok(http.get("/audit/chain/head", role="auditor"))["notification_id"]
    assert now > head["notification_id"]
    part = http.ok(http.get("/audit/chain", role="auditor", expected_head=head["head"],
                            after=now))
    assert (part["intact"], part["kept_head_checked"], part["kept_head_at"]) == (
        True, False, None)
    # Begun past the first event, a walk could not tell a head kept before it from none.
    after = CliRunner().invoke(main, ["chain", "--expected-head", head["head"], "--after", "2"])
    assert after.exit_code == 2
    assert "give --expected-at" in after.output
    malformed = CliRunner().invoke(main, ["chain", "--expected-head", "abc"])
    assert malformed.exit_code == 2
    assert "64 lowercase hexadecimal digits" in malformed.output
    # The ledger goes on: the head kept still proves what came before it.
    http.ok(http.post("/accounts/P1/buy-in", {"amount": 10}, role="cashier"))
    kept = ["--expected-head", head["head"], "--expected-at", str(head["notification_id"])]
    later = CliRunner().invoke(main, ["chain", *kept])
    assert later.exit_code == 0, later.output
    assert (f"intact: the link at notification {head['notification_id']} is the one kept "
            "outside") in later.stdout
    # A kept head that does not match is a finding, and the walk goes on to the end.
    early = ["--expected-head", other, "--expected-at", "2"]
    walked = CliRunner().invoke(main, ["chain", *early])
    assert walked.exit_code == 1
    assert walked.stdout.startswith("BROKEN: the link at notification 2 is ")
    last = http.ok(http.get("/audit/chain/head", role="auditor"))["notification_id"]
    assert walked.stdout.endswith(f"up to notification {last}\n")  # no head to keep from it
    alone = CliRunner().invoke(main, ["chain", "--expected-at", "1"])
    assert alone.exit_code == 2
    assert "give both" in alone.output


def test_the_chain_command_lists_every_altered_event_past_the_findings_of_one_part(
        make_app, database, monkeypatch):
    from ledger.storage import CHAIN_FINDINGS_MAX

    app = make_app()
    http = Http(app.test_client())
    http.ok(http.post("/accounts", {"player": "P9"}, role="cashier"), 201)
    for _ in range(CHAIN_FINDINGS_MAX + 5):
        http.ok(http.post("/accounts/P9/buy-in", {"amount": 1}, role="cashier"))
    schema = app.extensions["pitboss"].env["POSTGRES_SCHEMA"]
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        table = f'"{schema}".ledger_events'
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        altered = conn.execute(f"UPDATE {table} SET state = state || '\\x20'::bytea WHERE "
                               "topic = 'pitboss:Account.BoughtIn' RETURNING 1").fetchall()
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    assert len(altered) > CHAIN_FINDINGS_MAX
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    result = CliRunner().invoke(main, ["chain"])
    assert result.exit_code == 1
    broken = [line for line in result.stdout.splitlines() if line.startswith("BROKEN: ")]
    assert len(broken) == len(altered)  # in parts, but all of them


def test_a_chain_walk_stopped_keeps_what_it_found_and_goes_on_from_where_it_says(
        make_app, database, monkeypatch):
    # Ctrl-C threw the walk away, and then dropped what it had found: following its hint,
    # a walk of an altered record said "intact".
    app = make_app()
    from tests.e2e.conftest import Desk

    Desk(Http(app.test_client())).round()
    schema = app.extensions["pitboss"].env["POSTGRES_SCHEMA"]
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        table = f'"{schema}".ledger_events'
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        conn.execute(f"UPDATE {table} SET state = state || '\\x20'::bytea "
                     "WHERE notification_id = 2")
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    monkeypatch.setattr(cli, "CHAIN_PART_ROWS", 3)
    real_progress = cli._progress

    @contextlib.contextmanager
    def stopped_at_the_fifth(length: int, label: str, **kwargs: Any) -> Iterator[Any]:
        with real_progress(length, label, **kwargs) as reached:
            def tell(notification_id: int) -> None:
                if notification_id == 5:
                    raise KeyboardInterrupt
                reached(notification_id)
            yield tell

    monkeypatch.setattr(cli, "_progress", stopped_at_the_fifth)
    stopped = CliRunner().invoke(main, ["chain"])
    assert stopped.exit_code == 1  # the record was altered: that stands, stopped or not
    assert "(notification 2) does not match the chain" in stopped.stdout
    assert ("stopped: checked up to notification 3; go on with pitboss chain --after 3"
            in stopped.stderr)
    monkeypatch.setattr(cli, "_progress", real_progress)
    rest = CliRunner().invoke(main, ["chain", "--after", "3"])
    assert rest.exit_code == 0, rest.output
    # Not "intact" alone: the walk proves nothing of the events up to where it started.
    assert rest.stdout.splitlines()[-1] == ("intact after notification 3 (the link stored there "
                                            "taken on trust: the events up to it were not "
                                            "checked)")
    last = int(re.search(r"up to notification (\d+)", rest.stdout)[1])  # type: ignore[index]
    assert f"{last - 3:,} events checked, up to notification {last}" in rest.stdout
    past = CliRunner().invoke(main, ["chain", "--after", str(last + 1)])
    assert past.exit_code == 2
    assert f"There is no event at notification {last + 1}" in past.output
    assert "walking the chain" not in past.output  # refused before a walk shows as begun


def test_reading_commands_and_a_rebuild_say_so_when_the_database_holds_no_ledger(
        database, monkeypatch):
    # A rebuild read nothing, said it was at notification 0, and left its tables behind (a
    # restore into that database then failed on them).
    schema = f"nothing_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # (positions created its read models here)
    for argv, status in ((["chain"], CHAIN_NOT_WALKED_EXIT), (["replay", str(uuid.uuid4())], 1),
                         (["positions"], 1), (["rebuild", "balances"], 1)):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == status, result.output
        assert "holds no ledger yet" in result.output
        assert "Traceback" not in result.output
    with psycopg.connect(database.conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s",
                            (schema,)).fetchone() == (0,)


def test_a_worker_started_without_the_right_to_create_tables_before_them_says_who_makes_them(
        database, monkeypatch):
    # "database error: relation ... does not exist", and nothing more: the service role,
    # started before the owner's first start had made the tables.
    schema = f"unmade_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    monkeypatch.setenv("CREATE_TABLE", "n")
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    result = CliRunner().invoke(main, ["project"])
    assert result.exit_code == 1, result.output
    assert "does not exist (with CREATE_TABLE=n the tables are made by a start as their " \
           "owner: see Database roles in the README)" in result.output, result.output


def test_reading_commands_make_no_embedded_database_where_there_is_none(tmp_path, monkeypatch):
    # Run outside the checkout, they made and started one in ./var/pgdata, then said it held
    # no ledger, leaving a PostgreSQL running there.
    for name in ("DATABASE_URL", *POSTGRES_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    nowhere = tmp_path / "elsewhere" / "pgdata"
    monkeypatch.setenv("PITBOSS_DATA_DIR", str(nowhere))
    # `db check` made a 38 MB database and said "ok".
    for argv, status in ((["chain"], CHAIN_NOT_WALKED_EXIT), (["replay", str(uuid.uuid4())], 1),
                         (["positions"], 1), (["db", "check"], 1), (["rebuild", "balances"], 1)):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == status, result.output
        assert result.output == (f"Error: there is no embedded database in {nowhere}: run this "
                                 "where the service runs (the folder holding var/pgdata), or "
                                 "set PITBOSS_DATA_DIR or DATABASE_URL\n")
    assert not nowhere.parent.exists()


def test_db_check_names_an_embedded_server_reached_by_database_url_and_no_password(
        database, monkeypatch):
    # It said "postgres:***@ (from DATABASE_URL)", where the start-up log named the embedded
    # server: a password that was never set, and another origin than the log's.
    for name in POSTGRES_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", database.url())
    result = CliRunner().invoke(main, ["db", "check"])
    assert result.exit_code == 0, result.output
    assert result.output == (f"ok: {database.masked()} (from DATABASE_URL, the embedded "
                             f"PostgreSQL in {database.host})\n")
    assert "***" not in result.output


def _positions(env: dict[str, str], database: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``pitboss positions`` on ``env``'s schema of the session's database."""
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    return CliRunner().invoke(main, ["positions"])


def test_positions_says_when_the_worker_never_made_the_read_models(postgres_env, database,
                                                                   monkeypatch):
    env = postgres_env()
    GameLedger(env=env, shoe_key=ShoeSealer.new_key()).close()  # the ledger's tables only
    result = _positions(env, database, monkeypatch)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: The read models are not made yet (balances_tracking, ")
    assert result.output.endswith(" missing): the projection worker, pitboss project, makes "
                                  "them.\n")


def test_positions_after_an_upgrade_before_the_owners_start_names_the_tables_and_the_start(
        postgres_env, database, monkeypatch):
    # An earlier version's read models, without a table this version adds: it said the read
    # models were not made, and that the worker makes them (which refuses to, as the service).
    # Their positions answer; the tables still to be made are named, and who makes them.
    env = postgres_env()
    GameLedger(env=env, shoe_key=ShoeSealer.new_key()).close()
    with Engine(env) as worker:  # the read models made, as the earlier version made them
        worker.catch_up(100)
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(
            sql.Identifier(env["POSTGRES_SCHEMA"], "balances_settings")))
    result = _positions(env, database, monkeypatch)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("balances     at ")
    assert result.stderr == ("warning: The read models lack this version's tables "
                             "balances_settings: start pitboss once as the database owner, "
                             "which makes them (README: Upgrading).\n")


def test_positions_warns_of_a_read_model_past_the_ledgers_last_event(postgres_env, database,
                                                                      monkeypatch):
    from projections.base import LEDGER_APP
    from projections.engine import Engine

    env = postgres_env()
    GameLedger(env=env, shoe_key=ShoeSealer.new_key()).close()
    Engine(env).close()  # the read models made, at 0
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{env["POSTGRES_SCHEMA"]}".round_index_tracking VALUES '
                     "(%s, 9)", (LEDGER_APP,))
    result = _positions(env, database, monkeypatch)
    assert result.exit_code == 0, result.output
    assert result.stderr == ("warning: round_index is at 9, past the ledger's last event 0: it "
                             "holds events the ledger no longer has (the ledger restored from "
                             "an older backup?); rebuild it: pitboss rebuild round_index\n")


@pytest.mark.parametrize("schema", ['no"such', "a b", "1st", "x" * 64, "user", "select",
                                    "Ledger"])
def test_a_schema_that_is_no_plain_name_is_refused_in_a_sentence(database, monkeypatch, schema):
    # The library writes it into its SQL unquoted: a quote in it, or a reserved word, ended in
    # a traceback; capitals name another schema unquoted than quoted.
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    for argv in (["positions"], ["db", "check"]):  # db check said "ok" to a schema serve refuses
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 1, result.output
        assert result.output == ("Error: POSTGRES_SCHEMA is a plain name: a lowercase letter or "
                                 "_, then up to 62 lowercase letters, digits or _, and no word "
                                 f"PostgreSQL reserves; not {schema!r}\n")


def test_the_projection_worker_refuses_a_poll_interval_that_is_no_number(monkeypatch):
    # NaN passed the range check, and the worker failed with a traceback once started.
    result = CliRunner().invoke(main, ["project", "--poll-interval", "nan"])
    assert result.exit_code == 2, result.output
    assert "'nan' is not a number of seconds." in result.output


UNREACHABLE = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing",
               "POSTGRES_CONNECT_TIMEOUT": "1"}


@pytest.mark.parametrize(("env", "argv", "said"), [
    # The reason, as `pitboss db check` gives it (the pool said only that it got no connection).
    (UNREACHABLE, ["positions"], "PostgreSQL at 127.0.0.1:1/nothing is unavailable: "),
    (UNREACHABLE, ["rebuild", "balances"], "PostgreSQL at 127.0.0.1:1/nothing is unavailable: "),
    (UNREACHABLE, ["replay", "00000000-0000-0000-0000-000000000000"],
     "PostgreSQL at 127.0.0.1:1/nothing is unavailable: "),
    (UNREACHABLE, ["chain"], "PostgreSQL at 127.0.0.1:1/nothing is unavailable: "),
    (UNREACHABLE, ["project"], "PostgreSQL at 127.0.0.1:1/nothing is unavailable: "),
    ({"PITBOSS_GAMING_DAY_TZ": "Mars/Olympus"}, ["positions"], "not an IANA time zone"),
    ({"PITBOSS_GAMING_DAY_START": "6am"}, ["project"], "HH:MM"),
])
def test_what_the_operator_can_mend_is_one_line_not_a_traceback(database, monkeypatch, env,
                                                                argv, said):
    monkeypatch.setenv("DATABASE_URL", database.url())
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(main, argv)
    # The chain walk keeps 1 for an altered record.
    assert result.exit_code == (CHAIN_NOT_WALKED_EXIT if argv == ["chain"] else 1), result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.startswith("Error: ")
    assert said in result.output


def test_only_a_database_not_prepared_is_an_operator_error_among_refused_statements():
    from eventsourcing.persistence import ProgrammingError

    from api.cli import _operator_can_mend

    def wrapped(cause: Exception) -> ProgrammingError:
        error = ProgrammingError(str(cause))
        error.__cause__ = cause
        return error

    for unprepared in (psycopg.errors.UndefinedTable("no table"),
                       psycopg.errors.InvalidSchemaName("no schema"),
                       psycopg.errors.InsufficientPrivilege("no right")):
        assert _operator_can_mend(unprepared)
        assert _operator_can_mend(wrapped(unprepared))
    defect = psycopg.errors.UndefinedColumn("no column")
    assert not _operator_can_mend(defect)
    assert not _operator_can_mend(wrapped(defect))


@pytest.mark.parametrize("argv", [
    ["replay", "00000000-0000-0000-0000-000000000000", "--url", "notaurl", "--key", "k"],
    ["simulate", "--url", "localhost:8000", "--key", "a", "--key", "b"],
])
def test_a_malformed_api_url_is_a_usage_error(argv):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert "not an http(s) URL" in result.output


def test_the_simulated_players_follow_the_legal_list():
    state: dict[str, Any] = {"phase": "playing", "legal": [
        {"decision": "stand", "player": "A", "box": 1, "hand": 0},
        {"decision": "hit", "player": "A", "box": 1, "hand": 0},
        {"decision": "surrender", "player": "A", "box": 1, "hand": 0},
        {"decision": "void", "player": "", "box": 0, "hand": 0}],
        "turn": {"box": 1, "hand": 0},
        "boxes": [{"box": 1, "owner": "A", "hands": [{"hand": 0, "cards": ["TS", "6D"]}]}],
        "dealer": {"cards": ["hidden", "TC"]}}
    assert next_decision(state) == ("surrender", {"player": "A", "box": 1})
    state["dealer"]["cards"] = ["6C"]
    assert next_decision(state) == ("stand", {"player": "A", "box": 1, "hand": 0})


# --- the long-running commands, as processes -------------------------------------------------


def _command_env(database, postgres_env, tmp_path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("POSTGRES_", "PITBOSS_"))}
    env.update({"DATABASE_URL": database.url(),
                "POSTGRES_SCHEMA": postgres_env()["POSTGRES_SCHEMA"],
                "PITBOSS_SHOE_KEY": ShoeSealer.new_key().hex(),
                "PITBOSS_KEYS_FILE": str(tmp_path / "keys.jsonl"),
                "PITBOSS_DATA_DIR": str(tmp_path / "pgdata")})
    return env


# Run as `pitboss ARGS`, with a real SIGINT sent as the command line starts loading.
_INTERRUPTED_LOADING = """
import os, signal, sys
class Interrupting:
    def find_spec(self, name, path=None, target=None):
        if name == "api.cli":
            os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, Interrupting())
sys.argv = ["pitboss", *sys.argv[1:]]
from api.launch import main
main()
"""


@pytest.mark.parametrize(("argv", "status", "said"), [
    (["rebuild", "balances"], 130, "nothing was done"),
    (["chain"], CHAIN_NOT_WALKED_EXIT, "the chain was not walked")])
def test_a_ctrl_c_while_the_command_loads_ends_it_in_a_sentence(argv, status, said):
    # Loading takes a second or more; a Ctrl-C in it printed a traceback (and `chain` exited
    # 1, which an alarm reads as an altered record).
    import subprocess
    import sys
    from importlib.metadata import entry_points

    assert entry_points(group="console_scripts")["pitboss"].value == "api.launch:main"
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_LOADING, *argv],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (status, f"interrupted while starting: {said}\n")


def test_a_chain_walk_interrupted_exits_3_and_its_help_0(database, postgres_env, tmp_path):
    # Ctrl-C ended in click's "Aborted!" and status 1, which means an altered record; --help
    # exited 3, with a traceback.
    import subprocess
    import sys

    from tests.faults import interrupted_once_waiting

    assert CliRunner().invoke(main, ["chain", "--help"]).exit_code == 0
    ledger_schema = postgres_env()
    GameLedger(env=ledger_schema, shoe_key=ShoeSealer.new_key()).close()
    schema = ledger_schema["POSTGRES_SCHEMA"]
    env = {**_command_env(database, postgres_env, tmp_path), "POSTGRES_SCHEMA": schema}
    with psycopg.connect(database.conninfo()) as holder:  # the walk waits on this lock
        holder.execute(f'LOCK TABLE "{schema}".ledger_events IN ACCESS EXCLUSIVE MODE')
        chain = subprocess.Popen([sys.executable, "-m", "api.cli", "chain"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with psycopg.connect(database.conninfo(), autocommit=True) as watcher:
            err = interrupted_once_waiting(chain, lambda: watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s", (f"%{schema}%",)).fetchone() != (0,), "the walk")
    assert chain.returncode == CHAIN_NOT_WALKED_EXIT, err
    assert "interrupted: the chain was not walked to its end" in err


def test_a_rebuild_stopped_before_its_swap_exits_1(database, postgres_env, tmp_path):
    # It exited 0, so a script took the live view for rebuilt.
    import signal
    import subprocess
    import sys

    ledger_schema = postgres_env()
    ledger = GameLedger(env=ledger_schema, shoe_key=ShoeSealer.new_key())
    ledger.open_account("a", "cashier", "P1")
    for n in range(1500):  # 3,000 events: read one a batch, seconds of rebuilding
        ledger.buy_in(f"b{n}", "cashier", "P1", 1)
    ledger.close()
    env = {**_command_env(database, postgres_env, tmp_path),
           "POSTGRES_SCHEMA": ledger_schema["POSTGRES_SCHEMA"]}
    rebuild = subprocess.Popen([sys.executable, "-m", "api.cli", "rebuild", "balances",
                                "--batch-size", "1"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _read_until(rebuild, "rebuilding balances from event 0", 60)
        rebuild.send_signal(signal.SIGTERM)
        out, _ = rebuild.communicate(timeout=60)
    finally:
        rebuild.kill()
    assert rebuild.returncode == 1, out
    assert out.rstrip().endswith("stopped before the swap, live view kept")


def _read_until(process, marker: str, timeout_s: float) -> list[str]:
    """The lines of ``process``'s standard error up to the first holding ``marker``. A process
    that has written no such line within ``timeout_s`` is killed (its pipe then ends), so that
    the test fails instead of waiting on a quiet pipe for good."""
    import threading

    lines: list[str] = []
    deadline = threading.Timer(timeout_s, process.kill)
    deadline.start()
    try:
        while line := process.stderr.readline():
            lines.append(line)
            if marker in line:
                return lines
    finally:
        deadline.cancel()
    raise AssertionError(f"no {marker!r} within {timeout_s} s (the process ended, or was "
                         f"killed then):\n{''.join(lines)}")


def _demo(env: dict[str, str], port: int, *, rounds: int) -> Any:
    """``pitboss demo`` started on ``port``, its standard error piped."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "api.cli", "demo", "--port", str(port),
                             "--rounds", str(rounds)], env=env, stderr=subprocess.PIPE, text=True)


def test_demo_serves_the_docs_and_a_demo_table_and_stops_on_sigterm(database, postgres_env,
                                                                    tmp_path, unused_port):
    import time
    import urllib.request

    demo = _demo(_command_env(database, postgres_env, tmp_path), unused_port, rounds=2)
    try:
        lines = _read_until(demo, "Ctrl-C stops", 60)
        url = f"http://127.0.0.1:{unused_port}"
        keys = {line.split()[0]: line.split()[2] for line in lines if " key " in line}
        assert set(keys) == {"auditor", "dealer", "cashier", "manager"}
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"{url}/docs", timeout=5) as answer:
            assert b"swagger" in answer.read().lower()
        from api.client import Client

        auditor = Client(url, keys["auditor"])
        assert auditor.get("/whoami") == {"name": "demo-auditor", "role": "auditor"}
        deadline = time.monotonic() + 20
        while not auditor.get("/audit/rounds")["items"] and time.monotonic() < deadline:
            time.sleep(0.2)  # the projection worker catches up
        assert len(auditor.get("/audit/rounds")["items"]) == 2
        auditor.close()
    finally:
        _stop(demo)


def test_serve_plays_tables_side_by_side_on_threaded_workers(database, postgres_env, tmp_path,
                                                             unused_port, monkeypatch):
    import subprocess
    import sys
    import threading
    import time
    import urllib.request
    import uuid

    from api.cli import run_simulation
    from api.client import ApiError, Client
    from api.simulate import SimulationStopped

    # Set empty, as an env file's "GUNICORN_TIMEOUT_S=" sets it: the default (gunicorn's
    # configuration read "" as a number and stopped; for WEB_CONCURRENCY gunicorn itself did).
    env = {**_command_env(database, postgres_env, tmp_path), "GUNICORN_TIMEOUT_S": "",
           "WEB_CONCURRENCY": "", "PITBOSS_READ_TIMEOUT_S": "1"}
    keys = {}
    for role in ("dealer", "cashier", "auditor"):
        made = CliRunner().invoke(main, ["keys", "create", "--name", f"t-{role}", "--role", role,
                                         "--file", env["PITBOSS_KEYS_FILE"]])
        keys[role] = made.stdout.strip()
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port",
                               str(unused_port), "--workers", "2", "--threads", "3"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{unused_port}"
    try:
        _read_until(server, "Using worker: api.gunicorn_worker.ProblemThreadWorker", 60)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        played = run_simulation(url, [keys["dealer"], keys["cashier"]], tables=4, rounds=3,
                                preset="casino", progress=False)
        auditor = Client(url, keys["auditor"])
        try:
            assert [len(table.rounds) for table in played] == [3, 3, 3, 3]
            for round_id in (r for table in played for r in table.rounds):
                assert auditor.get(f"/audit/rounds/{round_id}/check")["ok"]
            chain = auditor.get("/audit/chain")
            assert chain["intact"], chain["findings"]
        finally:
            auditor.close()
        # One table stopped by an error (its player's chips cashed out under it): the other
        # played on to its last round, for hours at --rounds 100000, before anything was said.
        failing, playing = (f"x{uuid.uuid4().hex[:7]}" for _ in range(2))
        names = iter([failing, playing])
        monkeypatch.setattr("api.simulate.secrets.token_hex", lambda _n: next(names))
        stopped: list[SimulationStopped] = []

        def simulate() -> None:
            try:
                run_simulation(url, [keys["dealer"], keys["cashier"]], tables=2, rounds=2000,
                               preset="casino", progress=False)
            except SimulationStopped as exc:
                stopped.append(exc)

        simulation = threading.Thread(target=simulate, daemon=True)
        simulation.start()
        cashier = Client(url, keys["cashier"])
        try:
            drained, deadline = f"sim-{failing}-P2", time.monotonic() + 120
            # Below the least stake, until the table stops: chips held in a round come back
            # with its settlement.
            while simulation.is_alive() and time.monotonic() < deadline:
                try:
                    available = cashier.get(f"/accounts/{drained}")["available"]
                    if available >= 10:
                        cashier.post(f"/accounts/{drained}/cash-out", {"amount": available - 5})
                except ApiError:  # not opened yet, or its available chips moved meanwhile
                    pass
                time.sleep(0.02)
        finally:
            cashier.close()
        simulation.join(120)
        assert not simulation.is_alive(), "the other table played on"
        (error,) = stopped
        assert "fewer chips available" in str(error)
        rounds = {table.name: len(table.rounds) for table in error.tables}
        assert rounds[f"sim-{playing}"] < 2000  # none, if its first had not started yet
        # A client gone quiet mid-request held its thread for good, with no answer.
        head = (f"POST /accounts/P1/buy-in HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                f"{keys['cashier']}\r\nIdempotency-Key: stalled\r\nContent-Type: "
                "application/json\r\nContent-Length: 13\r\n\r\n")
        answer = _answer_to(unused_port, head + '{"amo')
        assert answer.startswith("HTTP/1.1 408 "), answer
        assert "stopped arriving before it was whole" in answer
        # In chunks, stopped right at the 64 KiB cap (a 500 and a traceback).
        chunked = head.replace("Content-Length: 13", "Transfer-Encoding: chunked").replace(
            "stalled", "stalled-chunks")
        answer = _answer_to(unused_port, chunked + f"10000\r\n{' ' * 65536}\r\n")
        assert answer.startswith("HTTP/1.1 408 "), answer
        # Chunks framed wrongly: a 500 with werkzeug's words, the connection kept open.
        for n, (framing, words) in enumerate((
                ("zz\r\n{}\r\n0\r\n\r\n", "Invalid chunk size: b'zz'"),
                ('5\r\n{"amo}\r\n0\r\n\r\n', "Invalid chunk terminator"))):
            answer = _answer_to(unused_port, chunked.replace("stalled-chunks", f"framed-{n}")
                                + framing)
            assert answer.startswith("HTTP/1.1 400 "), answer
            assert "\r\nConnection: close\r\n" in answer, answer
            assert "is not well-formed HTTP, so the server did not read it and nothing was " \
                   f"done: {words}" in answer, answer
        # A transfer coding that gunicorn passes over, unread: the buy-in was made.
        gzipped = chunked.replace("chunked", "gzip, chunked\r\nConnection: close").replace(
            "stalled-chunks", "gz")
        answer = _answer_to(unused_port, gzipped + 'd\r\n{"amount": 5}\r\n0\r\n\r\n')
        assert answer.startswith("HTTP/1.1 415 "), answer
        assert "send it with no transfer coding but chunked" in answer
        # Ended short (the client closed its side): gunicorn hands over what came, and a
        # body that parses was carried out as if whole.
        short = head.replace("Content-Length: 13", "Content-Length: 40").replace(
            "stalled", "ended-short")
        answer = _answer_to(unused_port, short + '{"amount": 5}', close_sending=True)
        assert answer.startswith("HTTP/1.1 408 "), answer
        assert _answer_to(unused_port, "GET /healthz HTTP/1.1\r\nHost: x\r\n") == ""
        _read_until(server, "a client sent nothing for 1 s in the middle of a request's headers",
                    20)
    finally:
        _stop(server)


def _answer_to(port: int, sent: str, *, close_sending: bool = False) -> str:
    """What the server answers to ``sent`` before it closes the connection (a client that
    sends no more, but waits 20 s at most; ``close_sending``: and says so)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(sent.encode())
        if close_sending:
            conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.decode()


def test_stopping_a_child_stops_its_whole_group_even_a_process_that_ignores_sigterm(tmp_path):
    # As a gunicorn worker its master could not stop in time: it must not outlive the stop.
    import os
    import subprocess
    import sys
    import time

    from api.cli import stop_groups

    pid_file = tmp_path / "stubborn.pid"
    stubborn = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time; "
                               f"subprocess.Popen([sys.executable, '-c', {stubborn!r}]); "
                               "time.sleep(60)"], start_new_session=True)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the stubborn child did not start"
        time.sleep(0.05)
    child_pid = int(pid_file.read_text())
    stop_groups([parent], wait_s=0.5)
    assert parent.returncode is not None
    deadline = time.monotonic() + 5
    while True:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break  # gone
        with open(f"/proc/{child_pid}/stat") as stat_file:
            if stat_file.read().split()[2] == "Z":
                break  # killed, awaiting its reaper
        assert time.monotonic() < deadline, "the child outlived its group's stop"
        time.sleep(0.05)


def test_demo_stopped_during_its_rounds_says_so_and_serves_nothing(database, postgres_env,
                                                                  tmp_path, unused_port):
    import signal

    # It printed "pitboss is serving" and the keys as it shut down, and exited 0.
    demo = _demo(_command_env(database, postgres_env, tmp_path), unused_port, rounds=1000)
    try:
        _read_until(demo, "casino: 1 table(s) x 1000 rounds", 60)
        demo.send_signal(signal.SIGINT)
        said = demo.communicate(timeout=60)[1]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130, said
    assert "stopped before the demo was ready: nothing is served" in said
    assert "serving on" not in said
    assert "Ctrl-C stops" not in said


def _stop(process) -> None:
    """SIGTERM, and a clean exit within 30 s."""
    process.terminate()
    assert process.wait(timeout=30) == 0
    if process.stderr is not None:
        process.stderr.close()


def test_the_projection_worker_stops_cleanly_on_sigterm(database, postgres_env, tmp_path):
    import signal
    import subprocess
    import sys

    env = _command_env(database, postgres_env, tmp_path)
    worker = subprocess.Popen([sys.executable, "-m", "api.cli", "project", "--poll-interval",
                               "0.1"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        _read_until(worker, "projection worker started", 30)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
        assert worker.stderr is not None
        assert "projection worker stopped" in worker.stderr.read()
        worker.stderr.close()


def test_a_rebuild_that_meets_events_that_do_not_add_up_says_so_in_a_sentence(
        make_app, database, monkeypatch):
    # A cash-out of chips the account never had (as one decided on a forged snapshot would
    # be): the rebuild ended in a traceback of the projection's internals.
    from ledger.aggregates import ids
    from ledger.aggregates.account import Account
    from tests.faults import append_around_the_ledger

    app = make_app()
    ledger = app.extensions["pitboss"].ledger()
    ledger.open_account("o", "cashier", "P9")
    ledger.buy_in("b", "cashier", "P9", 50)
    account = ledger.repository.get(ids.account_id("P9"))
    append_around_the_ledger(ledger, Account.CashedOut(  # type: ignore[call-arg]
        originator_id=account.id, originator_version=account.version + 1,
        timestamp=account.modified_on, amount=1000, actor="cashier", request_id="forged"))
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", app.extensions["pitboss"].env["POSTGRES_SCHEMA"])
    result = CliRunner().invoke(main, ["rebuild", "balances"])
    assert result.exit_code == 1, result.output
    assert re.fullmatch(r"Error: balances: the rebuild stopped at events that do not add up "
                        r"\(account P9 \(.*\) would have available -950 and held 0 after "
                        r"notification \d+ \(R-M3\)\)\. They were written around the "
                        r"ledger, .* \(an account's statement, a round's check\)\n",
                        result.output), result.output


def test_rebuild_swaps_in_a_fresh_view_and_positions_show_no_lag(make_app, database,
                                                                  monkeypatch):
    app = make_app()
    desk_http = Http(app.test_client())
    from tests.e2e.conftest import Desk

    desk = Desk(desk_http)
    desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=10)
    monkeypatch.setenv("DATABASE_URL", database.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", app.extensions["pitboss"].env["POSTGRES_SCHEMA"])
    for name in ("balances", "round_index", "table_days"):
        result = CliRunner().invoke(main, ["rebuild", name])
        assert result.exit_code == 0, result.output
        assert f"{name}: " in result.output
        assert "events read" in result.output
    shown = CliRunner().invoke(main, ["positions"])
    assert shown.exit_code == 0, shown.output
    rows = [line.split() for line in shown.output.splitlines()]
    assert {row[0] for row in rows} == {"balances", "round_index", "table_days"}
    assert all(row[-1] == "0" for row in rows)  # nothing behind the ledger
    unknown = CliRunner().invoke(main, ["rebuild", "nope"])
    assert unknown.exit_code == 2
    # A flag that does nothing for the read model named was taken, and the rebuild said done.
    flagged = CliRunner().invoke(main, ["rebuild", "balances", "--new-gaming-day"])
    assert flagged.exit_code == 2
    assert "--new-gaming-day is for table_days; balances counts no days" in flagged.output
