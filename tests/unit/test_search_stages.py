"""Stage marks (services/search/stages.py): kept inside recording(), by child tasks too; nothing outside."""
import asyncio

from memplane_server.services.search.stages import recording, stage, staged


def test_stages_inside_recording_are_kept_in_the_order_they_end():
    with recording() as stages:
        with stage("outer"):
            with stage("inner"):
                pass
    assert [s.name for s in stages] == ["inner", "outer"]
    assert all(s.end >= s.start for s in stages)


def test_a_stage_in_a_task_started_inside_recording_is_kept():
    async def run():
        with recording() as stages:
            await asyncio.ensure_future(staged("channel", asyncio.sleep(0)))
        return stages
    assert [s.name for s in asyncio.run(run())] == ["channel"]


def test_stages_outside_recording_keep_nothing():
    with recording() as stages:
        pass
    with stage("unrecorded"):
        pass
    assert stages == []
