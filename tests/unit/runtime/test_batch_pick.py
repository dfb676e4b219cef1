"""Which waiting deliveries the batching gate hands the pool as one job
(``worker.batching.pick``): order kept per orchestrator, free across them."""

from __future__ import annotations

from orchmem.worker.runtime.batching import pick

WB, BULLETIN = "orchmem.writeback", "orchmem.bulletin"


def batchable(name: str) -> bool:
    return name == WB


def reads(name: str) -> bool:
    return name == BULLETIN


def test_another_orchestrators_bulletin_does_not_split_a_batch() -> None:
    waiting = [(WB, "a"), (BULLETIN, "b"), (WB, "c"), (WB, "a")]
    assert pick(waiting, 64, batchable) == [0, 2, 3]
    # As a read-only task, the bulletin runs in the same job, after the writes' commit.
    assert pick(waiting, 64, batchable, reads=reads) == [0, 1, 2, 3]


def test_a_write_back_after_its_own_orchestrators_bulletin_waits_for_it() -> None:
    waiting = [(WB, "a"), (BULLETIN, "a"), (WB, "a"), (WB, "c"), (BULLETIN, "c"), (WB, "c")]
    assert pick(waiting, 64, batchable) == [0, 3]
    # The bulletin of a is next, and alone; a's later write-back follows it.
    assert pick(waiting[1:], 64, batchable) == [0]


def test_bulletins_join_the_batch_of_the_writes_before_them_but_not_later_writes() -> None:
    waiting = [(WB, "a"), (BULLETIN, "a"), (WB, "a"), (WB, "c"), (BULLETIN, "c"), (WB, "c")]
    # Each bulletin runs after the commit of its own earlier write, and before the
    # write published after it (which waits for the next job).
    assert pick(waiting, 64, batchable, reads=reads) == [0, 1, 3, 4]
    assert pick([waiting[2], waiting[5]], 64, batchable, reads=reads) == [0, 1]


def test_a_bulletin_does_not_pass_a_delivery_of_its_orchestrator_left_waiting() -> None:
    edit = "orchmem.edit"
    waiting = [(WB, "a"), (edit, "b"), (BULLETIN, "b"), (BULLETIN, "a"), (BULLETIN, "c")]
    assert pick(waiting, 64, batchable, reads=reads) == [0, 3, 4]
    # The oldest a bulletin: other orchestrators' bulletins and writes join it.
    waiting = [(BULLETIN, "a"), (BULLETIN, "b"), (WB, "a"), (WB, "c"), (BULLETIN, "c")]
    assert pick(waiting, 64, batchable, reads=reads) == [0, 1, 3, 4]


def test_a_task_that_cannot_batch_runs_alone_and_first_when_oldest() -> None:
    assert pick([(BULLETIN, "a"), (WB, "b"), (WB, "c")], 64, batchable) == [0]
    assert pick([("orchmem.edit", "a"), (BULLETIN, "b")], 64, batchable, reads=reads) == [0]


def test_a_delivery_without_an_orchestrator_is_a_barrier_and_the_size_is_bounded() -> None:
    assert pick([(WB, "a"), (WB, None), (WB, "b")], 64, batchable) == [0]
    assert pick([(WB, str(i)) for i in range(10)], 4, batchable) == [0, 1, 2, 3]
    assert pick([], 4, batchable) == []
