"""Two teams sharing a domain: what one team writes to the domain the other finds; private stays private.

Shows tenancy: with the platform admin key it creates a domain and two tenants (teams), each
with one agent and an agent key, and grants the domain to both (read-write to the team that
writes, read-only to the other). The flights team's agent then writes one DOMAIN memory and one
PRIVATE memory; the hotels team's agent searches and finds the first, never the second.
Every run makes new tenants and a new domain, so it can run again.

Run it against `make serve` with the platform admin key printed at its first start:

    MEMPLANE_API_KEY=mpk_... .venv/bin/python examples/shared_domain.py

MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server.
"""
import os
import sys
import uuid

from memplane import AdminClient, MemoryClient, MemplaneError

ADDRESS = os.environ.get("MEMPLANE_ADDRESS", "127.0.0.1:50051")
API_KEY = os.environ.get("MEMPLANE_API_KEY") or sys.exit(
    "set MEMPLANE_API_KEY to the platform admin key (make serve prints it at first start)")


def main() -> None:
    run = uuid.uuid4().hex[:6]
    domain, teams = f"travel-{run}", {"flights": f"flights-{run}", "hotels": f"hotels-{run}"}
    keys = {}
    with AdminClient(ADDRESS, API_KEY) as admin:
        admin.create_domain(domain, description="what every travel team should know")
        for team, tenant in teams.items():
            admin.create_tenant(tenant)
            admin.create_agent(tenant, "bot")
            admin.grant_domain(domain, tenant, "read_write" if team == "flights" else "read")
            keys[team] = admin.create_api_key(tenant_id=tenant, agent_id="bot", role="agent").secret
            print(f"created tenant {tenant} with agent bot, granted {domain}")

    with MemoryClient(ADDRESS, keys["flights"]) as flights, MemoryClient(ADDRESS, keys["hotels"]) as hotels:
        shared = flights.write_one("Travellers to Kyoto in April need bookings two months ahead",
                                   kind="lesson", scope="domain", domain=domain)
        private = flights.write_one("Our airline partner discount code is FLY-2231", kind="fact", scope="private")
        print(f"flights wrote a {shared.scope.name} memory ({shared.content!r})")
        print(f"flights wrote a {private.scope.name} memory ({private.content!r})")

        found = {hit.memory.id: hit.memory for hit in hotels.search("booking Kyoto in April", top_k=10).hits}
        found |= {hit.memory.id: hit.memory for hit in hotels.search("airline discount code", top_k=10).hits}
        if shared.id not in found:
            sys.exit("the hotels team did not find the domain memory")
        if private.id in found:
            sys.exit("the hotels team found the flights team's private memory")
        seen = found[shared.id]
        print(f"hotels found the {domain} memory: {seen.content!r} (from tenant {seen.tenant_id})")
        print("hotels did not find the flights team's private memory")


if __name__ == "__main__":
    try:
        main()
    except MemplaneError as error:  # the server's code and stable reason, e.g. PERMISSION_DENIED
        sys.exit(f"memplane call failed: {error}")
