"""The committed protobuf bindings are exactly what protoc makes of proto/.

profile_pb2.py is regenerated with grpc_tools.protoc (the protoc the project
pins) and compared byte for byte; the private lite descriptor, built at run
time by pyproflab.decode.lite, must equal protoc's reading of
proto/profile_lite.proto.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

try:
    import grpc_tools  # noqa: F401

    HAVE_GRPC_TOOLS = True
except ImportError:
    HAVE_GRPC_TOOLS = False

needs_protoc = pytest.mark.skipif(
    not HAVE_GRPC_TOOLS, reason="grpcio-tools is not installed (pip install -e '.[dev]')"
)


def protoc(*args: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-Iproto", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr


@needs_protoc
def test_profile_pb2_is_regenerated_identically(tmp_path: Path) -> None:
    protoc(f"--python_out={tmp_path}", "proto/profile.proto")
    fresh = (tmp_path / "profile_pb2.py").read_bytes()
    committed = (REPO / "pyproflab" / "_proto" / "profile_pb2.py").read_bytes()
    assert fresh == committed, "pyproflab/_proto/profile_pb2.py is stale: regenerate it"


@needs_protoc
def test_lite_descriptor_matches_its_proto(tmp_path: Path) -> None:
    from google.protobuf import descriptor_pb2

    from pyproflab.decode.lite import lite_file_descriptor

    out = tmp_path / "lite.desc"
    protoc(f"--descriptor_set_out={out}", "proto/profile_lite.proto")
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    expected = fds.file[0]
    for msg in expected.message_type:
        for field in msg.field:
            field.ClearField("json_name")  # derived by protoc, not part of the schema
    assert lite_file_descriptor() == expected


def test_lite_field_numbers_match_profile_proto() -> None:
    from pyproflab._proto import profile_pb2
    from pyproflab.decode.lite import LITE_FIELDS

    full = {f.name: f.number for f in profile_pb2.Profile.DESCRIPTOR.fields}
    assert {name: number for name, number, *_ in LITE_FIELDS} == full
