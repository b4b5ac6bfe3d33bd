"""`sam build` succeeds offline and builds what Lambda should get: each function's code is the `onward`
package and its status page, without the command line and the local emulation (no tests, no virtual
environments), via the Makefile's build-<Function> targets (BuildMethod: makefile). Powertools comes from
the layer, so nothing is downloaded.

aws-sam-cli lives in its own virtual environment (it pins an older boto3): `make test` creates .venv-sam and
passes its `sam` as ONWARD_SAM. Without it this test fails; it is never skipped. About 2 s.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from onward_infra.template import TEMPLATE_PATH, load_template

pytestmark = pytest.mark.e2e  # runs a tool of its own (aws-sam-cli): not in `make test-fast`

ROOT = TEMPLATE_PATH.parent
SAM = Path(os.environ.get("ONWARD_SAM") or ROOT / ".venv-sam" / "bin" / "sam")


def test_sam_build_succeeds_offline_and_ships_only_the_runtime_code(tmp_path: Path) -> None:
    assert SAM.exists(), f"{SAM} is missing: run `make test` (it creates .venv-sam with aws-sam-cli)"
    build = tmp_path / "build"
    result = subprocess.run(
        [str(SAM), "build", "--build-in-source", "--template-file", str(TEMPLATE_PATH), "--build-dir", str(build)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Build Succeeded" in result.stdout

    functions = [name for name, r in load_template()["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]
    built = load_template(build / "template.yaml")
    for function in functions:
        code = build / function
        assert built["Resources"][function]["Properties"]["CodeUri"] == function
        module, _, _ = built["Resources"][function]["Properties"]["Handler"].rpartition(".")
        # the product, and the SAM function folder whose module the Handler names (handlers/, relay/, projector/)
        assert sorted(p.name for p in code.iterdir()) == sorted(["onward", module.split(".")[0]])
        assert not (code / "onward" / "cli").exists() and not (code / "onward_infra").exists()
        assert not (code / "onward" / "client").exists()  # for callers outside the platform (httpx: not in Lambda)
        assert not list(code.rglob("moto*")) and not list(code.rglob("lean_client"))
        assert not (code / "onward" / "template.yaml").exists()
        assert (code / (module.replace(".", "/") + ".py")).is_file()
        assert (code / "onward" / "web" / "index.html").is_file()
        assert not list(code.rglob("__pycache__")) and not list(code.rglob("test_*.py"))
