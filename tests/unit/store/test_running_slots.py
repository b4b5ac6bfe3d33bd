"""Which RUNNING counter a claim charges (onward.store.running_slots): the one on the queue entry it takes its job
from while that shard has room (issue 34: one item updated instead of two), else the one with the most room, so
a cap split over shards still admits a job while any shard has room."""

from __future__ import annotations

import random

from onward.store.running_slots import RunningSlots


def test_the_shard_the_job_is_taken_from_is_charged_while_it_has_room():
    """Without the preference an uncapped tenant's claims would charge a random least-running shard: nearly
    always another entry than the one they update, two items each."""
    rng = random.Random(1)
    assert {RunningSlots([5, 0, 0], (None, None, None)).pick(rng, flex=False, prefer=0) for _ in range(20)} == {0}
    assert RunningSlots([1, 0], (2, 2)).pick(rng, flex=False, prefer=0) == 0
    assert RunningSlots([3, 3], (3, 3)).pick(rng, flex=True, prefer=1) == 1, "flexing: past the caps"


def test_a_full_shard_sends_the_claim_to_the_one_with_most_room_and_the_cap_is_exact():
    """A cap split over shards (here 3 over 2: 2 and 1) never refuses a job whose own shard is full while
    another has room, and never admits past the whole cap."""
    rng = random.Random(1)
    slots = RunningSlots([2, 0], (2, 1))
    assert slots.pick(rng, flex=False, prefer=0) == 1
    slots.full(1)
    assert slots.pick(rng, flex=False, prefer=0) is None
    lowered = RunningSlots([0, 3], (1, 1))  # a cap lowered from 4 to 2 while 3 ran on shard 1
    assert lowered.pick(rng, flex=False, prefer=0) is None, "3 running of a cap of 2"


def test_the_admission_holds_the_entry_to_its_share_less_what_older_items_count():
    """The claim's condition is on the queue entry's counter alone, so the attempts an older RUNNING item of the
    shard counts (claimed before the counters moved) come off the share: without it the entry could admit
    the whole share on top of them."""
    slots = RunningSlots([2, 0], (3, 3), entry_caps=(1, 3))
    assert slots.pick(random.Random(1), flex=False, prefer=0) == 0
    assert (slots.admission_cap(0), slots.admission_cap(1)) == (1, 3)
    assert RunningSlots([0], (None,)).admission_cap(0) is None
