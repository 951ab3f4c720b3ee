"""The usage page: what the visitor's tenant used per UTC day (a platform admin's key: every
tenant), and the same figures as CSV for billing. Needs an admin key; another is told so (403)."""
from __future__ import annotations

import csv
import io
from datetime import date

from starlette.requests import Request
from starlette.responses import Response

from .guard import admin_client_of, signed_in
from .pages import BadInput
from .render import page


def _days(request: Request) -> dict[str, date | None]:
    out: dict[str, date | None] = {}
    for name in ("start_day", "end_day"):
        text = request.query_params.get(name, "").strip()
        try:
            out[name] = date.fromisoformat(text) if text else None
        except ValueError:
            raise BadInput(f"{name} must be a day as YYYY-MM-DD") from None
    return out


@signed_in
async def usage(request: Request) -> Response:
    days = _days(request)
    async with admin_client_of(request) as admin:
        report = await admin.get_usage(start_day=days["start_day"], end_day=days["end_day"])
    return page(request, "usage.html", report=report, values={k: v.isoformat() if v else "" for k, v in days.items()})


@signed_in
async def usage_csv(request: Request) -> Response:
    days = _days(request)
    async with admin_client_of(request) as admin:
        report = await admin.get_usage(start_day=days["start_day"], end_day=days["end_day"])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("tenant", "day", "metric", "name", "value"))
    writer.writerows(report.rows())
    name = f"memplane-usage-{report.start_day.isoformat()}-{report.end_day.isoformat()}.csv"
    return Response(out.getvalue(), media_type="text/csv",
                    headers={"content-disposition": f'attachment; filename="{name}"'})
