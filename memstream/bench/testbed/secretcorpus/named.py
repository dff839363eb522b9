"""Ways of writing a named value (a label, an environment name, the value): the carriers of
each draw, and the secrets written with them (``named_secrets``)."""

from __future__ import annotations

from typing import Any, Callable

from memstream.bench.testbed.secretcorpus.values import PROVIDERS, ValueMaker

# --- ways of writing a named value ----------------------------------------------------

_Carrier = Callable[[ValueMaker, str, str, str], str]  # (values, label, env name, value) -> text


def _ROTATED(v: ValueMaker, label: str, env: str, x: str) -> str:
    return f"I rotated it, the new one is {x}"


def _ALONE(v: ValueMaker, label: str, env: str, x: str) -> str:
    return x


TUNED_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f"{env}={x}",
    lambda v, label, env, x: f"export {env}={x}",
    lambda v, label, env, x: f'export {env}="{x}"',
    lambda v, label, env, x: f"here's my {label}: {x}",
    lambda v, label, env, x: f"my {label} is {x}, can you check why it fails?",
    lambda v, label, env, x: f'{{"{env.lower()}": "{x}", "region": "us-east-1"}}',
    lambda v, label, env, x: f"config:\n  {env.lower()}: {x}\n  timeout: 30",
    lambda v, label, env, x: f"use `{x}` as the {label}",
    lambda v, label, env, x: f"{label}:\n```\n{x}\n```",
    lambda v, label, env, x: f"client = Client(api_key='{x}')",
    _ROTATED,
    _ALONE,
    lambda v, label, env, x: f"# .env\nDEBUG=false\n{env}={x}\nPORT=8000",
]

_CONTEXT_FREE = (_ROTATED, _ALONE)

MORE_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f'{env} = "{x}"  # TODO move to vault',
    lambda v, label, env, x: f"The {label} was {x} before the rotation.",
    lambda v, label, env, x: f"  - name: {env}\n    value: '{x}'",
    lambda v, label, env, x: f"docker run -e {env}={x} myimage:latest",
    lambda v, label, env, x: f"set {env.lower()} to {x} please",
    lambda v, label, env, x: f'<add key="{env}" value="{x}" />',
    lambda v, label, env, x: f"Failing request, {label} = {x}, status 401",
    lambda v, label, env, x: f'$env:{env} = "{x}"',
    lambda v, label, env, x: f"{env.lower()}={x} npm run deploy",
    lambda v, label, env, x: f"ok so the token I used is {x} (the {label})",
    lambda v, label, env, x: f'os.environ["{env}"] = "{x}"',
    lambda v, label, env, x: f"> {x}\nthat's the {label} from the dashboard",
]


THIRD_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f"{env}: {x}",
    lambda v, label, env, x: f"Can you debug this? {env.lower()} = '{x}' and it still says 401",
    lambda v, label, env, x: f"[default]\n{env.lower()} = {x}",
    lambda v, label, env, x: f"The {label} for prod is {x}",
    lambda v, label, env, x: f'settings.py:\n{env} = "{x}"',
    lambda v, label, env, x: f"heroku config:set {env}={x}",
    lambda v, label, env, x: f"in the .env: `{env}={x}`",
    lambda v, label, env, x: f'{{\n  "name": "ci",\n  "{env.lower()}": "{x}"\n}}',
    lambda v, label, env, x: f"pasting the {label} here so I don't lose it: {x}",
    lambda v, label, env, x: f"kubectl create secret generic app --from-literal={env}={x}",
    lambda v, label, env, x: f"new {label}: {x}",
    lambda v, label, env, x: f"```\n{x}\n```\nthat's my {label}",
]

LAST_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f'{env.lower()}: "{x}"',
    lambda v, label, env, x: f"secrets:\n  {env.lower()}: {x}",
    lambda v, label, env, x: f"ENV {env}={x}",
    lambda v, label, env, x: f"the {label} is `{x}`",
    lambda v, label, env, x: f"fetch(url, {{ headers: {{ '{env}': '{x}' }} }})",
    lambda v, label, env, x: f"gh secret set {env} --body {x}",
    lambda v, label, env, x: f"{env}={x} python bot.py",
    lambda v, label, env, x: f"oops I pasted my {label}: {x}",
    lambda v, label, env, x: f"{label.capitalize()} -> {x}",
    lambda v, label, env, x: f"| {env} | {x} |",
    lambda v, label, env, x: f"config.{env.lower()} = '{x}'",
    lambda v, label, env, x: f"why does {x} not work as my {label}?",
]

# Values with no shape of their own (hex, base64, a UUID): without a word around them they
# cannot be told from a hash or an id, by any detector, so they are written with one.
_SHAPELESS = {"Twilio auth token", "AWS secret key", "API key", "secret", "Heroku API key"}


def named_secrets(v: ValueMaker, carriers: list[_Carrier], count: int, part: str) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        kind, label, env, make = PROVIDERS[i % len(PROVIDERS)]
        x = make(v)
        at = (i // len(PROVIDERS) + i) % len(carriers)
        if label in _SHAPELESS:
            while carriers[at] in _CONTEXT_FREE:
                at = (at + 1) % len(carriers)
        carrier = carriers[at]
        out.append({"text": carrier(v, label, env, x), "secrets": [x], "kind": kind, "form": "named", "part": part})
    return out
