"""A stock Python OAuth client (Authlib's requests integration, OAuth2Session), driven by
test/python_client.test.ts over JSON lines on stdin/stdout.

The first input line is the job: {"issuer", "flow": "authorization_code" | "client_credentials",
"client_id", "client_secret", "auth_method", "redirect_uri"?, "scope"}. Everything else about the
server comes from its discovery document. For authorization_code the script prints
{"event": "authorization_url", "url", "state"} and waits for {"callback": "<redirect URL>"}; the
test logs in and consents for it. At the end it prints {"event": "done", ...} with what each step
got, and every HTTP request it made (method, URL, how the client authenticated, the form's field
names). An unexpected failure prints {"event": "error", "error"} and exits 1.

Run with Debian's /usr/bin/python3 (python3-authlib, python3-requests).
"""
import json
import sys
import traceback
from urllib.parse import parse_qsl

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.integrations.base_client import OAuthError


def emit(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        raise RuntimeError("stdin closed")
    return json.loads(line)


class Recorder:
    """A requests response hook: what every request the session sent looked like."""

    def __init__(self):
        self.requests = []

    def __call__(self, response, *args, **kwargs):
        request = response.request
        body = request.body or ""
        if isinstance(body, bytes):
            body = body.decode()
        content_type = request.headers.get("Content-Type", "")
        form = sorted(k for k, _ in parse_qsl(body, keep_blank_values=True)) if "x-www-form-urlencoded" in content_type else []
        authorization = request.headers.get("Authorization", "")
        self.requests.append({
            "method": request.method,
            "url": request.url,
            "authorization": authorization.split(" ")[0] if authorization else None,
            "form": form,
            "status": response.status_code,
        })
        return response


def outcome(response):
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return {"status": response.status_code, "body": body}


def oauth_error(call):
    """Runs `call`, which should fail with an OAuth error; returns the error code (or "no error")."""
    try:
        call()
        return "no error"
    except OAuthError as error:
        return error.error


def main():
    job = read()
    issuer = job["issuer"]
    discovery = requests.get(issuer + "/.well-known/openid-configuration", timeout=10)
    discovery.raise_for_status()
    metadata = discovery.json()
    if metadata["issuer"] != issuer:
        raise RuntimeError("discovery names issuer %r, expected %r" % (metadata["issuer"], issuer))

    recorder = Recorder()
    session = OAuth2Session(
        client_id=job["client_id"],
        client_secret=job["client_secret"],
        token_endpoint_auth_method=job["auth_method"],
        revocation_endpoint_auth_method=job["auth_method"],
        scope=job["scope"],
        redirect_uri=job.get("redirect_uri"),
        code_challenge_method="S256",
    )
    session.hooks["response"].append(recorder)
    api = issuer + "/rest/companies"
    result = {"event": "done", "metadata_issuer": metadata["issuer"]}

    if job["flow"] == "client_credentials":
        token = session.fetch_token(metadata["token_endpoint"], grant_type="client_credentials")
        result["token"] = dict(token)
        result["create"] = outcome(session.post(api, json={"name": job.get("company", "Made by Authlib")}))
        result["list"] = outcome(session.get(api))
        result["requests"] = recorder.requests
        emit(result)
        return

    code_verifier = generate_token(64)
    url, state = session.create_authorization_url(metadata["authorization_endpoint"], code_verifier=code_verifier)
    emit({"event": "authorization_url", "url": url, "state": state})
    callback = read()["callback"]

    # Authlib checks the state it is given against the callback's, and sends the verifier.
    token = session.fetch_token(metadata["token_endpoint"], authorization_response=callback, state=state, code_verifier=code_verifier)
    result["token"] = dict(token)
    result["userinfo"] = outcome(session.get(metadata["userinfo_endpoint"]))
    result["list"] = outcome(session.get(api))

    refreshed = session.refresh_token(metadata["token_endpoint"])
    result["refreshed"] = dict(refreshed)
    result["list_after_refresh"] = outcome(session.get(api))

    revocation = session.revoke_token(metadata["revocation_endpoint"], token=refreshed["refresh_token"], token_type_hint="refresh_token")
    result["revocation"] = outcome(revocation)
    result["refresh_after_revocation"] = oauth_error(lambda: session.refresh_token(metadata["token_endpoint"], refresh_token=refreshed["refresh_token"]))
    result["list_after_revocation"] = outcome(session.get(api))
    result["userinfo_after_revocation"] = outcome(session.get(metadata["userinfo_endpoint"]))
    result["requests"] = recorder.requests
    emit(result)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # reported to the test, which fails with it
        emit({"event": "error", "error": "%s: %s" % (type(error).__name__, error), "trace": traceback.format_exc()})
        sys.exit(1)
