"""Waits for a handler to serve its OpenAPI document, saves it, and checks it is valid OpenAPI 3.1.

Usage: openapi_check.py URL OUT.json
"""

import json
import sys
import time
import urllib.request

from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

url, out = sys.argv[1], sys.argv[2]
deadline = time.time() + 60
while True:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
        break
    except Exception as exc:  # not listening yet
        if time.time() > deadline:
            sys.exit(f"openapi: {url} did not answer: {exc}")
        time.sleep(0.2)
with open(out, "w") as f:
    json.dump(doc, f)

if not doc.get("openapi", "").startswith("3.1"):
    sys.exit(f"openapi: the document is OpenAPI {doc.get('openapi')!r}, not 3.1")
validate(doc, cls=OpenAPIV31SpecValidator)
ops = sum(1 for item in doc["paths"].values() for m in item if m in ("get", "put", "post", "delete", "patch"))
print(f"openapi: {url} is valid OpenAPI {doc['openapi']} ({ops} operations)")
