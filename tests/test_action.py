"""The GitHub Action (``action.yml``): its inputs and steps, and its scripts run locally.

The action is parsed as YAML and its shape checked; then its ``run:`` steps are
executed in order with bash, in a temporary workspace, the way the runner would run
them (``bash --noprofile --norc -eo pipefail``, the step's ``env:``, a fresh
``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY`` per step, later steps skipped after a
failure unless ``if: always()``).

- ``uses:`` steps (``actions/setup-python``, ``actions/upload-artifact``) are not run,
  but their ``with:`` values are rendered, so every expression in the file is checked.
- ``${{ ... }}`` is rendered by a small renderer that knows exactly the expressions the
  action uses (``inputs.X``, ``github.action_path``, ``steps.ID.outputs.NAME``); any
  other expression fails the test, and so does any ``${{`` left after rendering.
- The install step *runs*, but not pip: kvconform is already installed (editable), so a
  ``python`` shim first on ``PATH`` records the arguments of ``python -m pip ...``
  instead of installing, and hands every other call to this interpreter. The test
  checks those arguments (the action's own checkout, and the ``generated`` extra when
  generated > 0). A ``kvconform`` shim runs ``python -m kvconform`` with this
  interpreter too, so the run step exercises the code under test.
- Every run is restricted to a few cases with the ``args`` input, which keeps the
  file to a few seconds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kvconform_reference
import pytest
import yaml

import kvconform

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"

REFERENCE = "kvconform.adapters.reference:ReferenceAdapter"
# Fails PLAN-22 (a rebind that commits slot by slot): exit status 1 on a fast selection.
MUTANT = "tests.mutants.plan_validity:RebindCommitsSlotBySlot"
FAST = "--requirement PLAN-22"

INPUTS = {
    "adapter": "",
    "adapter-cmd": "",
    "expectations": "",
    "generated": "0",
    "seed": "",
    "args": "",
    "report-dir": "kvconform-reports",
    "artifact-name": "kvconform-reports",
    "python-version": "3.11",
    "kvconform-ref": "",
}
OUTPUTS = {"exit-code", "report-dir"}

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


# -- shape -------------------------------------------------------------------


def test_inputs_and_outputs(action: dict[str, Any]) -> None:
    assert action["name"] and action["description"]
    inputs = action["inputs"]
    assert {name: str(spec.get("default", "")) for name, spec in inputs.items()} == INPUTS
    for name, spec in inputs.items():
        assert spec.get("required", False) is False, name
        assert spec["description"].strip(), name
    assert set(action["outputs"]) == OUTPUTS
    assert "steps.kvconform.outputs.exit-code" in action["outputs"]["exit-code"]["value"]


def test_steps(action: dict[str, Any]) -> None:
    runs = action["runs"]
    assert runs["using"] == "composite"
    steps = runs["steps"]
    uses = [step.get("uses") for step in steps]
    assert uses == [None, "actions/setup-python@v5", None, None, "actions/upload-artifact@v4"]
    check, setup, install, run, upload = steps

    assert setup["with"] == {"python-version": "${{ inputs.python-version }}"}
    assert "github.action_path" in install["env"]["KVCONFORM_ACTION_PATH"]
    assert run["id"] == "kvconform"
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ inputs.report-dir }}"

    for step in (check, install, run):
        assert step["shell"] == "bash"
        # Inputs reach a script only through env: an expression spliced into a script
        # would be a script injection.
        assert "${{" not in step["run"], step.get("name")
        assert "eval" not in step["run"].split(), step.get("name")
        for value in step["env"].values():
            assert EXPRESSION.fullmatch(value), value
    assert "$GITHUB_STEP_SUMMARY" in run["run"]
    assert 'exit "$status"' in run["run"]


# -- running the action's scripts --------------------------------------------


@dataclass
class ActionRun:
    status: int
    workspace: Path
    outputs: dict[str, str]
    summary: str
    pip: list[str] | None
    log: str
    ran: list[str] = field(default_factory=list)


def render(value: Any, inputs: dict[str, str], steps: dict[str, dict[str, str]]) -> str:
    """``${{ ... }}`` in ``value``, for exactly the expressions the action uses."""

    def one(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression == "github.action_path":
            return str(ROOT)
        if expression.startswith("inputs."):
            name = expression.removeprefix("inputs.")
            assert name in INPUTS, f"unknown input in {match.group(0)}"
            return inputs.get(name, INPUTS[name])
        parts = expression.split(".")
        if len(parts) == 4 and parts[0] == "steps" and parts[2] == "outputs":
            return steps.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"the test's renderer does not know {match.group(0)}")

    rendered = EXPRESSION.sub(one, str(value))
    assert "${{" not in rendered, f"unrendered expression in {value!r}"
    return rendered


def read_outputs(path: Path) -> dict[str, str]:
    outputs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, value = line.partition("=")
        assert sep, f"not name=value in $GITHUB_OUTPUT: {line!r}"
        outputs[name] = value
    return outputs


def shims(directory: Path, pip_log: Path) -> Path:
    """``python`` (recording ``-m pip``) and ``kvconform``, both on this interpreter."""
    directory.mkdir()
    python = shlex.quote(sys.executable)
    (directory / "python").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
        f"  shift 2; printf '%s\\n' \"$@\" > {shlex.quote(str(pip_log))}; exit 0\n"
        "fi\n"
        f'exec {python} "$@"\n'
    )
    (directory / "kvconform").write_text(f'#!/bin/sh\nexec {python} -m kvconform "$@"\n')
    for shim in directory.iterdir():
        shim.chmod(0o755)
    return directory


def run_action(
    action: dict[str, Any],
    tmp_path: Path,
    inputs: dict[str, str],
    pythonpath: tuple[Path, ...] = (),
) -> ActionRun:
    assert set(inputs) <= set(INPUTS)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    pip_log = tmp_path / "pip-args"
    bin_dir = shims(tmp_path / "bin", pip_log)
    # The packages under test, whether installed or imported from the checkout.
    paths = [
        Path(kvconform.__file__).parent.parent,
        Path(kvconform_reference.__file__).parent.parent,
    ]
    base_env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("GITHUB_", "RUNNER_", "KVCONFORM_"))
    }
    base_env["PATH"] = f"{bin_dir}{os.pathsep}{base_env.get('PATH', '')}"
    base_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*paths, *pythonpath])

    steps: dict[str, dict[str, str]] = {}
    status, summary, log, ran = 0, "", [], []
    for index, step in enumerate(action["runs"]["steps"]):
        condition = step.get("if")
        assert condition in (None, "always()"), f"the test cannot evaluate if: {condition}"
        if "uses" in step:
            for value in step.get("with", {}).values():
                render(value, inputs, steps)
            continue
        if status != 0 and condition != "always()":
            continue
        name = step.get("id", f"step{index}")
        output_file = tmp_path / f"output-{index}"
        summary_file = tmp_path / f"summary-{index}"
        output_file.touch()
        summary_file.touch()
        script = tmp_path / f"step-{index}.sh"
        script.write_text(render(step["run"], inputs, steps))
        env = dict(base_env)
        env.update({key: render(value, inputs, steps) for key, value in step["env"].items()})
        env.update(GITHUB_OUTPUT=str(output_file), GITHUB_STEP_SUMMARY=str(summary_file))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        ran.append(step.get("name", name))
        log.append(f"--- {step.get('name', name)}: {done.returncode}\n{done.stdout}{done.stderr}")
        steps[name] = read_outputs(output_file)
        if name == "kvconform":
            summary = summary_file.read_text(encoding="utf-8")
        if done.returncode != 0 and status == 0:
            status = done.returncode

    outputs = {
        name: render(spec["value"], inputs, steps) for name, spec in action["outputs"].items()
    }
    pip = pip_log.read_text().splitlines() if pip_log.exists() else None
    return ActionRun(status, workspace, outputs, summary, pip, "\n".join(log), ran)


def test_conformant_run(action: dict[str, Any], tmp_path: Path) -> None:
    # A report directory with a space, and an extra flag whose value would run a command
    # if anything evaluated it: both must arrive as single, literal arguments.
    tricky = "trace $(touch pwned) `touch pwned`.txt"
    result = run_action(
        action,
        tmp_path,
        {
            "adapter": REFERENCE,
            "report-dir": "kv reports",
            "args": f"{FAST} --trace {shlex.quote(tricky)}",
        },
    )
    assert result.status == 0, result.log
    assert result.outputs == {"exit-code": "0", "report-dir": "kv reports"}
    # The action's own checkout, without the generated extra.
    assert result.pip == ["install", "--disable-pip-version-check", "--", str(ROOT)]

    assert result.summary.startswith("## kvconform "), result.summary
    assert "is conformant for its declared classes" in result.summary
    reports = result.workspace / "kv reports"
    assert {p.name for p in reports.iterdir()} == {
        "report.json",
        "report.xml",
        "summary.md",
        "report.html",
    }
    # kvconform wrote the summary to $GITHUB_STEP_SUMMARY only; the action copies it.
    assert (reports / "summary.md").read_text(encoding="utf-8") == result.summary
    report = json.loads((reports / "report.json").read_text(encoding="utf-8"))
    assert report["adapter"]["name"] == "kvconform-reference"
    assert report["summary"]["failed"] == 0 and report["summary"]["passed"] >= 1
    assert (result.workspace / tricky).is_file()
    assert not (result.workspace / "pwned").exists()


def test_failures_propagate_exit_status_1(action: dict[str, Any], tmp_path: Path) -> None:
    result = run_action(action, tmp_path, {"adapter": MUTANT, "args": FAST}, pythonpath=(ROOT,))
    assert result.status == 1, result.log
    assert result.outputs["exit-code"] == "1"
    assert "NOT CONFORMANT" in result.log or "not conformant" in result.summary.lower()
    report = json.loads(
        (result.workspace / "kvconform-reports" / "report.json").read_text(encoding="utf-8")
    )
    assert report["summary"]["failed"] >= 1


def test_adapter_that_cannot_start_is_exit_status_3(action: dict[str, Any], tmp_path: Path) -> None:
    result = run_action(action, tmp_path, {"adapter-cmd": "./target/release/my-adapter"})
    assert result.status == 3, result.log
    assert result.outputs["exit-code"] == "3"


def test_generated_installs_the_extra_and_passes_seed(
    action: dict[str, Any], tmp_path: Path
) -> None:
    result = run_action(
        action,
        tmp_path,
        {"adapter": REFERENCE, "generated": "2", "seed": "7", "args": "--id 'generated.*'"},
    )
    assert result.status == 0, result.log
    assert result.pip == [
        "install",
        "--disable-pip-version-check",
        "--",
        str(ROOT),
        "kvconform[generated]",
    ]
    assert "--generated 2 --seed 7" in result.log
    report = json.loads(
        (result.workspace / "kvconform-reports" / "report.json").read_text(encoding="utf-8")
    )
    ids = [case["id"] for case in report["results"]]
    assert ids and all(case_id.startswith("generated.") for case_id in ids)


@pytest.mark.parametrize(
    ("inputs", "reaches_install"),
    [
        ({}, False),  # neither adapter nor adapter-cmd
        ({"adapter": REFERENCE, "adapter-cmd": "./my-adapter"}, False),  # both
        ({"adapter": REFERENCE, "generated": "$(touch pwned)"}, False),
        ({"adapter": REFERENCE, "report-dir": ""}, False),
        ({"adapter": REFERENCE, "args": "--id 'unclosed"}, True),  # cannot be split
        # an option the action sets from its own inputs: the upload would find no reports
        ({"adapter": REFERENCE, "args": "--quiet --report-dir elsewhere"}, True),
        ({"adapter": REFERENCE, "args": "--markdown=summary.md"}, True),
        ({"adapter": REFERENCE, "seed": "7"}, True),  # kvconform: --seed needs --generated
    ],
)
def test_usage_errors_are_exit_status_2(
    action: dict[str, Any], tmp_path: Path, inputs: dict[str, str], reaches_install: bool
) -> None:
    result = run_action(action, tmp_path, inputs)
    assert result.status == 2, result.log
    assert (result.pip is not None) == reaches_install, result.log
    assert not (result.workspace / "pwned").exists()


def test_kvconform_ref_is_installed_as_given(action: dict[str, Any], tmp_path: Path) -> None:
    ref = "kvconform @ git+https://example.invalid/kvconform@0123456"
    result = run_action(
        action, tmp_path, {"adapter": REFERENCE, "kvconform-ref": ref, "args": FAST}
    )
    assert result.status == 0, result.log
    assert result.pip == ["install", "--disable-pip-version-check", "--", ref]
