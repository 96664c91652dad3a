#!/usr/bin/env python3
"""Checks the schema corpus against the jsonschema package: every "valid"
document validates against its schema and every "invalid" one does not, with
formats checked, so the corpus says what JSON Schema says.

Usage: check_schema_corpus.py DIR. Exits 1 on the first disagreement."""
import json
import pathlib
import sys

import jsonschema


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted(root.glob("*.json"))
    failures = 0
    for path in files:
        case = json.loads(path.read_text(encoding="utf-8"))
        schema = case["schema"]
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
        for doc in case["valid"]:
            errors = list(validator.iter_errors(doc))
            if errors:
                failures += 1
                print(f"{path.name}: valid document rejected: {doc!r}: {errors[0].message}")
        for doc in case["invalid"]:
            if validator.is_valid(doc):
                failures += 1
                print(f"{path.name}: invalid document accepted: {doc!r}")
    print(f"{len(files)} schemas checked, {failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
