"""A minimal OpenID Connect issuer on loopback, for the browser test of `BLOG_AUTH=jwt`.

Usage: oidc_issuer.py PORT CLIENT_ID AUDIENCE

Serves discovery, an authorization endpoint that signs the one test person in at once (it
redirects straight back with a code), a token endpoint that checks the PKCE verifier against the
challenge (S256) and the redirect URI, and answers an RS256 access token for AUDIENCE, and the
JWKS. Browser requests are cross-origin, so every answer allows any origin (test only).
"""

import base64
import hashlib
import json
import secrets
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PORT = int(sys.argv[1])
CLIENT_ID = sys.argv[2]
AUDIENCE = sys.argv[3]
ISSUER = f"http://127.0.0.1:{PORT}"
KID = "test-key-1"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
CODES = {}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n):
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def token(subject):
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": KID}
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "nbf": now, "exp": now + 600}
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    sig = KEY.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(sig)}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/.well-known/openid-configuration":
            return self.answer(200, {
                "issuer": ISSUER,
                "authorization_endpoint": f"{ISSUER}/authorize",
                "token_endpoint": f"{ISSUER}/token",
                "jwks_uri": f"{ISSUER}/jwks",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "id_token_signing_alg_values_supported": ["RS256"],
            })
        if url.path == "/jwks":
            pub = KEY.public_key().public_numbers()
            return self.answer(200, {"keys": [{"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256", "n": uint(pub.n), "e": uint(pub.e)}]})
        if url.path == "/authorize":
            ok = (
                q.get("response_type") == "code"
                and q.get("client_id") == CLIENT_ID
                and q.get("code_challenge_method") == "S256"
                and q.get("code_challenge")
                and q.get("redirect_uri", "").startswith("http://127.0.0.1:")
                and q.get("state")
            )
            if not ok:
                return self.answer(400, {"error": "invalid_request", "query": q})
            code = secrets.token_urlsafe(16)
            CODES[code] = q
            back = f"{q['redirect_uri']}?{urllib.parse.urlencode({'code': code, 'state': q['state']})}"
            return self.answer(302, None, [("Location", back)])
        self.answer(404, {"error": "not_found"})

    def do_POST(self):
        if self.path != "/token":
            return self.answer(404, {"error": "not_found"})
        length = int(self.headers.get("Content-Length", 0))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        req = CODES.pop(form.get("code", ""), None)
        if req is None or form.get("grant_type") != "authorization_code":
            return self.answer(400, {"error": "invalid_grant"})
        challenge = b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
        if challenge != req["code_challenge"] or form.get("redirect_uri") != req["redirect_uri"] or form.get("client_id") != CLIENT_ID:
            return self.answer(400, {"error": "invalid_grant", "error_description": "PKCE or redirect mismatch"})
        self.answer(200, {"access_token": token("person-1"), "token_type": "Bearer", "expires_in": 600, "scope": req.get("scope", "")})


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
