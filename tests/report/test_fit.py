"""`cortexm fit`'s placement (cortexm.report.fit.place): a placement is found whenever one
exists, and when none does, the one that leaves the fewest bytes without room. Checked against
an exhaustive enumeration of every placement of small random (needs, board) pairs, and on the
board that first fit (the placement before) failed for a MobileNetV2-sized program.
"""

from __future__ import annotations

import itertools
import random

from cortexm.report import fit

ROLES = ("data", "stack", "arena")  # three roles make every kind of overlap between regions


def _fewest_left_out(needs: list[fit.Need], profile: fit.Profile) -> int:
    """The fewest bytes any placement leaves without room: every need tried in every region
    that holds its role, and out."""
    capacity = [size for _, size, _ in profile.regions]
    options = [[k for k, (_, _, holds) in enumerate(profile.regions) if n.role in holds] + [None] for n in needs]
    fewest = sum(n.nbytes for n in needs)
    for choice in itertools.product(*options):
        loads = [0] * len(capacity)
        for need, k in zip(needs, choice, strict=True):
            if k is not None:
                loads[k] += need.nbytes
        if all(load <= size for load, size in zip(loads, capacity, strict=True)):
            fewest = min(fewest, sum(n.nbytes for n, k in zip(needs, choice, strict=True) if k is None))
    return fewest


def _random_region(rng: random.Random, name: str) -> tuple[str, int, tuple[str, ...]]:
    return name, rng.choice([6, 8, 10, 12, 16, 20]), tuple(sorted(rng.sample(ROLES, rng.randint(1, len(ROLES)))))


def _random_pair(rng: random.Random) -> tuple[list[fit.Need], fit.Profile]:
    regions = [_random_region(rng, f"r{k}") for k in range(rng.randint(1, 3))]
    if len(regions) > 1 and rng.random() < 0.3:  # a second bank like the first (the search skips its twin)
        regions[-1] = ("bank 2", *regions[0][1:])
    needs = [fit.Need(f"need {i}", rng.choice(ROLES), rng.randint(1, 12)) for i in range(rng.randint(1, 7))]
    return needs, fit.Profile("random", None, "", "", tuple(regions))


def _assert_is_a_placement(verdict: fit.Verdict, needs: list[fit.Need]) -> None:
    placed = [n for r in verdict.regions for n in r.placed]
    assert sorted(placed + verdict.unplaced, key=id) == sorted(needs, key=id)
    for region in verdict.regions:
        assert all(n.role in region.holds for n in region.placed)
        assert region.used == sum(n.nbytes for n in region.placed) <= region.nbytes


def test_the_placement_leaves_out_the_fewest_bytes_of_any_on_random_boards():
    rng = random.Random(39)
    pairs = [_random_pair(rng) for _ in range(2000)]
    disagree = []
    for needs, profile in pairs:
        verdict = fit.place(needs, profile)
        _assert_is_a_placement(verdict, needs)
        left_out = sum(n.nbytes for n in verdict.unplaced)
        if (left_out, verdict.least) != (_fewest_left_out(needs, profile),) * 2:
            disagree.append((needs, profile.regions, left_out))
    assert sum(fit.place(n, p).fits for n, p in pairs) in range(500, 1500)  # both answers well represented
    assert not disagree, f"{len(disagree)} of {len(pairs)} disagree with the enumeration, e.g. {disagree[0]}"


def test_where_first_fit_finds_a_placement_it_is_the_placement():
    rng = random.Random(40)
    for needs, profile in (_random_pair(rng) for _ in range(1000)):
        loads = [0] * len(profile.regions)
        for need in sorted(needs, key=lambda n: -n.nbytes):
            k = next((k for k, (_, size, holds) in enumerate(profile.regions)
                      if need.role in holds and loads[k] + need.nbytes <= size), None)
            if k is None:
                break
            loads[k] += need.nbytes
        else:
            assert [r.used for r in fit.place(needs, profile).regions] == loads


def test_a_bigger_board_fits_whatever_the_smaller_fits():
    # Bigger: one more region anywhere in the list, or one region larger (first fit failed both
    # ways, as in the issue: a DTCM just large enough to take the planned buffer).
    rng = random.Random(41)
    tried, smaller = 0, []
    for needs, profile in (_random_pair(rng) for _ in range(4000)):
        if not fit.place(needs, profile).fits:
            continue
        more, larger = list(profile.regions), list(profile.regions)
        more.insert(rng.randint(0, len(more)), _random_region(rng, "more"))
        k = rng.randrange(len(larger))
        larger[k] = (larger[k][0], larger[k][1] + rng.randint(1, 8), larger[k][2])
        for regions in (more, larger):
            tried += 1
            if not fit.place(needs, fit.Profile("bigger", None, "", "", tuple(regions))).fits:
                smaller.append((needs, profile.regions, regions))
    assert tried > 1500
    assert not smaller, f"{len(smaller)} of {tried} bigger boards fit less, e.g. {smaller[0]}"


# The numbers: a MobileNetV2-sized program on the M7. What first fit placed on the
# STM32H743ZI (DTCM 128,756 B: the planned buffer, heap, stack, temp allocator; AXI SRAM 25,484 B:
# the method allocator; static data left out) gives every RAM need; code and program are the
# runner's and a program that fit the STM32F746G-DISCO's 1 MiB flash.
MOBILENET_V2 = [fit.Need("code", "code", 170_572), fit.Need("program", "program", 612_352),
                fit.Need("static data", "data", 13_424), fit.Need("heap", "heap", 2_968),
                fit.Need("stack", "stack", 2_696), fit.Need("planned buffer 1", "arena", 122_880),
                fit.Need("method allocator", "arena", 25_484), fit.Need("temp allocator", "arena", 212)]


def test_a_planned_buffer_first_fit_put_in_the_dtcm_goes_to_the_axi_sram():
    boards = fit.profiles()
    assert fit.place(MOBILENET_V2, boards["stm32f746g-disco"]).fits
    verdict = fit.place(MOBILENET_V2, boards["stm32h743zi"])
    assert verdict.line() == ("FITS stm32h743zi: flash 782,924 of 2,097,152 B (37 %); DTCM 44,784 of 131,072 B (34 %); "
                              "AXI SRAM 122,880 of 524,288 B (23 %)")
    # Static data, heap and stack may go to the DTCM alone: the only placement leaves it room.
    assert [n.what for n in verdict.regions[1].placed] == ["method allocator", "static data", "heap", "stack",
                                                          "temp allocator"]


def test_what_does_not_fit_is_the_fewest_bytes_left_out():
    profile = fit.given_profile(["sram=10:arena"])
    needs = [fit.Need(f"planned buffer {k}", "arena", size) for k, size in ((1, 6), (2, 5), (3, 5))]
    verdict = fit.place(needs, profile)  # first fit took the 6 B buffer and left 10 B out
    assert verdict.line() == "DOES NOT FIT given memory: 6 B find no room (planned buffer 1 6 B); sram 10 of 10 B (100 %)"


def test_a_search_cut_short_claims_only_what_it_proved():
    # Two banks of 10 B: 7 + 7 + 6 B fill them only split, so no placement exists, yet no
    # count of bytes proves it; 8 B of arena and 5 B of static data fit only the other way round
    # from first fit's. Given one step, the search proves neither; given its steps, both.
    banks = fit.given_profile(["ram=10:data,arena", "sram=10:arena"])
    split = [fit.Need(f"planned buffer {k}", "arena", size) for k, size in ((1, 7), (2, 7), (3, 6))]
    swapped = [fit.Need("planned buffer 1", "arena", 8), fit.Need("static data", "data", 5)]
    for needs, verdict in ((split, "DOES NOT FIT given memory: 6 B find no room"), (swapped, "FITS given memory")):
        assert fit.place(needs, banks).line().startswith(verdict)
        cut = fit.place(needs, banks, steps=1)
        assert cut.line().startswith("UNDECIDED given memory: the search stopped before it found a placement or "
                                     "proved there is none; the best it found leaves "), cut.line()
        assert not cut.fits and cut.least == 0
    # More than 10 B for 10 B proves it does not fit at once; which 6 B of it is the search's.
    overflow = [fit.Need(f"planned buffer {k}", "arena", size) for k, size in ((1, 6), (2, 5), (3, 5))]
    cut = fit.place(overflow, fit.given_profile(["sram=10:arena"]), steps=1)
    assert cut.line() == ("DOES NOT FIT given memory: 10 B find no room (planned buffer 2 5 B, planned buffer 3 5 B; "
                          "the search stopped: at least 6 B must); sram 6 of 10 B (60 %)")
