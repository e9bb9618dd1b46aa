#!/usr/bin/env python3
"""Render template.yaml for given parameters, as JSON on stdout.

    python infra/render_template.py [-t template.yaml] PARAM=VALUE ... > out.json

Every parameter takes its template default unless an argument overrides it (pseudo parameters
such as AWS::Region=eu-west-1 too). The Conditions are evaluated for those values, every
Fn::If is replaced by the branch it picks (a branch of AWS::NoValue disappears from its list or
map), and resources and outputs whose Condition is false are removed. Everything else is left
as written: Ref, Fn::Sub, Fn::GetAtt and the rest stay unevaluated.

Why: checkov does not look inside Fn::If, so a grant behind a condition is never checked on the
plain template. Run on a rendered template, it sees what a stack with these parameters deploys.

Python 3.11 standard library and PyYAML only.
"""

import json
import re
import sys
from pathlib import Path

import yaml

NO_VALUE = {"Ref": "AWS::NoValue"}

# Values for pseudo parameters, so conditions that compare them evaluate (overridable).
PSEUDO = {
    "AWS::AccountId": "123456789012",
    "AWS::NotificationARNs": [],
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/reminders/00000000-0000-0000-0000-000000000000",
    "AWS::StackName": "reminders",
    "AWS::URLSuffix": "amazonaws.com",
}


class Error(Exception):
    pass


class CfnLoader(yaml.SafeLoader):
    """A SafeLoader that turns CloudFormation short forms (!Ref, !If, ...) into long forms."""


def _short_form(loader, tag_suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        # !GetAtt Resource.Attribute (the attribute itself may contain dots).
        resource, _, attribute = value.partition(".")
        value = [resource, attribute]
    return {f"Fn::{tag_suffix}": value}


CfnLoader.add_multi_constructor("!", _short_form)


def text(value):
    """A scalar as CloudFormation compares it: as a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    raise Error(f"not a scalar: {value!r}")


class Renderer:
    def __init__(self, template, overrides):
        self.template = template
        params = template.get("Parameters", {}) or {}
        self.values = dict(PSEUDO)
        for name, spec in params.items():
            if "Default" in spec:
                self.values[name] = self._typed(name, spec, text(spec["Default"]))
        for name, raw in overrides.items():
            if name in params:
                spec = params[name]
                allowed = spec.get("AllowedValues")
                if allowed is not None and raw not in [text(a) for a in allowed]:
                    raise Error(f"{name}={raw}: not one of {[text(a) for a in allowed]}")
                pattern = spec.get("AllowedPattern")
                for item in raw.split(",") if "List" in spec.get("Type", "") else [raw]:
                    if pattern is not None and not re.fullmatch(pattern, item):
                        raise Error(f"{name}={raw}: does not match its AllowedPattern {pattern}")
                self.values[name] = self._typed(name, spec, raw)
            elif name in PSEUDO:
                self.values[name] = raw
            else:
                raise Error(f"no parameter {name} in the template")
        missing = [n for n in params if n not in self.values]
        if missing:
            raise Error(f"no value for parameters without a default: {', '.join(missing)}")
        self.conditions = template.get("Conditions", {}) or {}
        self.evaluated = {}

    @staticmethod
    def _typed(name, spec, raw):
        kind = spec.get("Type", "String")
        if kind == "CommaDelimitedList" or kind.startswith("List<"):
            return raw.split(",")
        return raw

    # --- values inside conditions ---------------------------------------------------------

    def value(self, v):
        """A value a condition compares: literals, Ref to parameters and pseudo parameters,
        and Fn::Join, Fn::Select, Fn::Split, Fn::Sub, Fn::If over those."""
        if isinstance(v, list):
            return [self.value(i) for i in v]
        if not isinstance(v, dict):
            return text(v)
        if len(v) != 1:
            raise Error(f"not a value: {v!r}")
        (fn, args), = v.items()
        if fn == "Ref":
            if args not in self.values:
                raise Error(f"a condition refers to {args}, which is not a parameter")
            return self.values[args]
        if fn == "Fn::Join":
            delimiter, items = args
            items = self.value(items)
            return text(delimiter).join(text(i) for i in items)
        if fn == "Fn::Select":
            index, items = args
            return self.value(items)[int(self.value(index))]
        if fn == "Fn::Split":
            delimiter, whole = args
            return self.value(whole).split(text(delimiter))
        if fn == "Fn::Sub":
            if isinstance(args, str):
                pattern, names = args, {}
            else:
                pattern, names = args[0], {k: text(self.value(x)) for k, x in args[1].items()}

            def one(m):
                name = m.group(1)
                if name.startswith("!"):
                    return "${" + name[1:] + "}"
                if name in names:
                    return names[name]
                if name in self.values:
                    return text(self.values[name])
                raise Error(f"a condition's Fn::Sub refers to {name}, which is not a parameter")

            return re.sub(r"\$\{([^}]+)\}", one, pattern)
        if fn == "Fn::If":
            name, yes, no = args
            return self.value(yes if self.condition(name) else no)
        raise Error(f"{fn} is not supported inside a condition")

    # --- conditions -------------------------------------------------------------------------

    def condition(self, name):
        if name not in self.conditions:
            raise Error(f"no condition {name}")
        if name not in self.evaluated:
            self.evaluated[name] = None  # a cycle shows as None below
            self.evaluated[name] = self.expr(self.conditions[name])
        if self.evaluated[name] is None:
            raise Error(f"condition {name} refers to itself")
        return self.evaluated[name]

    def expr(self, c):
        if not (isinstance(c, dict) and len(c) == 1):
            raise Error(f"not a condition: {c!r}")
        (fn, args), = c.items()
        if fn == "Condition":
            return self.condition(args)
        if fn == "Fn::Equals":
            a, b = args
            return self.value(a) == self.value(b)
        if fn == "Fn::Not":
            (inner,) = args
            return not self.expr(inner)
        if fn == "Fn::And":
            return all(self.expr(i) for i in args)
        if fn == "Fn::Or":
            return any(self.expr(i) for i in args)
        raise Error(f"{fn} is not a condition function")

    # --- the template -------------------------------------------------------------------------

    def resolve_ifs(self, v):
        """v with every Fn::If replaced by its branch; AWS::NoValue as None (dropped by the
        enclosing list or map)."""
        if isinstance(v, list):
            out = []
            for i in v:
                r = self.resolve_ifs(i)
                if r is not None:
                    out.append(r)
            return out
        if isinstance(v, dict):
            if v == NO_VALUE:
                return None
            if len(v) == 1 and "Fn::If" in v:
                name, yes, no = v["Fn::If"]
                return self.resolve_ifs(yes if self.condition(name) else no)
            out = {}
            for k, x in v.items():
                r = self.resolve_ifs(x)
                if r is not None:
                    out[k] = r
            return out
        return v

    def render(self):
        t = dict(self.template)
        for section in ("Resources", "Outputs"):
            if section not in t:
                continue
            kept = {}
            for name, body in t[section].items():
                cond = body.get("Condition") if isinstance(body, dict) else None
                if cond is not None and not self.condition(cond):
                    continue
                kept[name] = body
            t[section] = kept
        for section in ("Globals", "Resources", "Outputs"):
            if section in t:
                t[section] = self.resolve_ifs(t[section])
        # Every condition is evaluated (a typo in one fails here, not at deploy time).
        for name in self.conditions:
            self.condition(name)
        return t


def main(argv):
    args = list(argv)
    path = Path(__file__).resolve().parent.parent / "template.yaml"
    if args[:1] == ["-t"]:
        if len(args) < 2:
            raise Error("-t needs a template path")
        path = Path(args[1])
        args = args[2:]
    overrides = {}
    for a in args:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        name, sep, value = a.partition("=")
        if not sep or not name:
            raise Error(f"expected PARAM=VALUE, got {a!r}")
        overrides[name] = value
    template = yaml.load(path.read_text(), Loader=CfnLoader)
    rendered = Renderer(template, overrides).render()
    json.dump(rendered, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (Error, OSError, yaml.YAMLError) as e:
        print(f"render_template.py: {e}", file=sys.stderr)
        sys.exit(2)
