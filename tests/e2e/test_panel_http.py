"""`memplane panel` over plain HTTP (httpx, no browser): how it signs in, keeps the key, and refuses
forged or cross-site state changes. The browser tests are in test_panel_browser.py."""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from memplane import MemoryClient, MemoryStatus


@contextmanager
def sign_in(panel: str, key: str) -> Iterator[httpx.Client]:
    """A client holding a signed-in session's cookie."""
    with httpx.Client(base_url=panel, follow_redirects=False, timeout=30) as client:
        response = client.post("/login", data={"api_key": key, "next": "/memories"}, headers={"origin": panel})
        assert response.status_code == 303, response.text
        yield client


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


@pytest.fixture
def stored(panel_server, panel_tenant):
    """A writer key and a memory of its tenant."""
    _, writer, _ = panel_tenant()
    with MemoryClient(panel_server.target, writer) as client:
        memory = client.write_one("The staging database is db-7", kind="fact", scope="global")
    return writer, memory


def test_the_key_stays_on_the_server_behind_an_httponly_strict_cookie(panel, stored):
    key, _ = stored
    login = httpx.post(f"{panel}/login", data={"api_key": key}, headers={"origin": panel})
    set_cookie = login.headers["set-cookie"]
    assert key not in set_cookie
    assert {"httponly", "samesite=strict", "path=/"} <= {part.strip().lower() for part in set_cookie.split(";")}
    session_id = set_cookie.split(";")[0].split("=", 1)[1]
    page = httpx.get(f"{panel}/memories", cookies={"memplane_panel": session_id})
    assert page.status_code == 200 and "db-7" in page.text
    assert key not in page.text and session_id not in page.text


def test_a_wrong_key_is_refused_at_sign_in(panel):
    response = httpx.post(f"{panel}/login", data={"api_key": "mpk_nope_nope"}, headers={"origin": panel})
    assert response.status_code == 401 and "not accepted" in response.text
    assert "set-cookie" not in response.headers


def test_sign_in_from_another_site_is_refused(panel, stored):
    key, _ = stored
    response = httpx.post(f"{panel}/login", data={"api_key": key}, headers={"origin": "https://evil.example"})
    assert response.status_code == 403 and "set-cookie" not in response.headers


def test_a_state_change_without_the_sessions_csrf_token_is_refused(panel, panel_server, stored):
    key, memory = stored
    with sign_in(panel, key) as client:
        forged = client.post(f"/memories/{memory.id}/forget", data={"confirmed": "yes", "csrf": "guess"})
        missing = client.post(f"/memories/{memory.id}/forget", data={"confirmed": "yes"})
    assert forged.status_code == missing.status_code == 403
    with MemoryClient(panel_server.target, key) as sdk:
        assert sdk.get_memory(memory.id).status is MemoryStatus.ACTIVE


def test_a_state_change_from_another_origin_is_refused_even_with_the_token(panel, panel_server, stored):
    key, memory = stored
    with sign_in(panel, key) as client:
        token = csrf_of(client.get(f"/memories/{memory.id}").text)
        response = client.post(f"/memories/{memory.id}/forget", data={"confirmed": "yes", "csrf": token},
                               headers={"origin": "https://evil.example"})
    assert response.status_code == 403
    with MemoryClient(panel_server.target, key) as sdk:
        assert sdk.get_memory(memory.id).status is MemoryStatus.ACTIVE


def test_signing_out_ends_the_session(panel, stored):
    key, _ = stored
    with sign_in(panel, key) as client:
        token = csrf_of(client.get("/memories").text)
        old_cookie = dict(client.cookies)
        assert client.post("/logout", data={"csrf": token}, headers={"origin": panel}).status_code == 303
    again = httpx.get(f"{panel}/memories", cookies=old_cookie, follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"].startswith("/login")


def test_every_page_sends_a_content_security_policy_without_inline_scripts(panel, stored):
    key, _ = stored
    with sign_in(panel, key) as client:
        policy = client.get("/memories").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy


def test_a_reader_key_cannot_forget_through_the_panel(panel, panel_server, panel_tenant):
    _, writer, reader = panel_tenant()
    with MemoryClient(panel_server.target, writer) as sdk:
        memory = sdk.write_one("The build cache lives on disk 3", kind="fact", scope="global")
        with sign_in(panel, reader) as client:
            token = csrf_of(client.get(f"/memories/{memory.id}").text)
            response = client.post(f"/memories/{memory.id}/forget", data={"confirmed": "yes", "csrf": token},
                                   headers={"origin": panel})
        assert response.status_code == 403 and "PERMISSION_DENIED" in response.text
        assert sdk.get_memory(memory.id).status is MemoryStatus.ACTIVE


def test_behind_a_tls_proxy_the_session_cookie_is_secure(panel, stored):
    """The proxy ends TLS and forwards plain HTTP with the public host name; the panel trusts no
    X-Forwarded-Proto from it (uvicorn trusts that header from loopback only)."""
    key, _ = stored
    public = "https://memplane.example.com"
    login = httpx.post(f"{panel}/login", data={"api_key": key},
                       headers={"origin": public, "host": "memplane.example.com"})
    assert login.status_code == 303, login.text
    assert "secure" in {part.strip().lower() for part in login.headers["set-cookie"].split(";")}


def test_on_this_machine_over_plain_http_the_cookie_works_without_secure(panel, stored):
    key, _ = stored
    login = httpx.post(f"{panel}/login", data={"api_key": key}, headers={"origin": panel})
    assert "secure" not in {part.strip().lower() for part in login.headers["set-cookie"].split(";")}


def test_a_tenant_admin_sees_its_tenants_usage_and_exports_it_as_csv(panel, panel_server):
    import time
    import uuid

    from memplane import AdminClient

    tenant = f"usage-{uuid.uuid4().hex[:8]}"
    with AdminClient(panel_server.target, panel_server.key("platform admin")) as admin:
        key = admin.create_tenant(tenant, create_admin_key=True).admin_key.secret
    with MemoryClient(panel_server.target, key) as sdk:
        sdk.write_one("The release train leaves on Thursdays", kind="fact")
    with sign_in(panel, key) as client:
        deadline = time.monotonic() + 30
        while "Write 1" not in (page := client.get("/usage")).text:  # written every few seconds
            assert time.monotonic() < deadline, page.text
            time.sleep(0.5)
        exported = client.get("/usage.csv")
    assert page.status_code == 200 and f"<h2>{tenant}</h2>" in page.text
    assert exported.headers["content-type"].startswith("text/csv")
    lines = exported.text.splitlines()
    assert lines[0] == "tenant,day,metric,name,value"
    assert {line.split(",")[0] for line in lines[1:]} == {tenant} and any(",calls,Write,1" in line for line in lines)


def test_a_key_that_is_no_admins_is_refused_the_usage_page(panel, stored):
    key, _ = stored
    with sign_in(panel, key) as client:
        response = client.get("/usage")
    assert response.status_code == 403 and "TENANT_ADMIN_REQUIRED" in response.text
