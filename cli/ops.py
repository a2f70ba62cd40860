"""CLI commands: operations — ``hpcguard config show`` (issue 7).

Example
-------
>>> print(settings_toml({"influx": {"url": "", "version": 2, "token": "***"}}))
[influx]
url = ""
version = 2
token = "***"
<BLANKLINE>
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import typer

from hpcguard.cli.common import CONFIG, config_app, emit_json, fail, flag


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string


def settings_toml(sections: Mapping[str, Mapping[str, Any]]) -> str:
    """Render ``Settings.as_dict()`` as TOML (loadable again with ``--config``)."""
    out = []
    for section, values in sections.items():
        out.append(f"[{section}]")
        out.extend(f"{key} = {_toml_value(value)}" for key, value in values.items())
        out.append("")
    return "\n".join(out)


@config_app.command("show")
def config_show(
    config: Optional[str] = CONFIG,
    json_out: bool = flag(False, "--json", help="Print JSON instead of TOML."),
) -> None:
    """Print the effective configuration, secrets masked.

    Defaults ← TOML file ← HPCGUARD_SECTION__KEY variables. Secrets show as "***";
    the TOML output can be saved and edited as a configuration file.
    """
    import tomllib

    from hpcguard.settings import Settings

    try:
        settings = Settings.load(config)
    except tomllib.TOMLDecodeError as exc:
        fail(f"cannot read configuration {config or 'from HPCGUARD_CONFIG'}: invalid TOML: {exc}")
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    data = settings.as_dict(mask_secrets=True)
    if json_out:
        emit_json(data)
    else:
        typer.echo("# effective hpcguard configuration (secrets masked)")
        typer.echo(settings_toml(data), nl=False)
