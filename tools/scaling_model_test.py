#!/usr/bin/python3
"""Checks of tools/scaling_model.py against values worked out by hand."""
import importlib.util
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("scaling_model",
                                              os.path.join(HERE, "scaling_model.py"))
model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)

# 1 us and 1 ns/B on the network, 0.1 us and 0.1 ns/B in shared memory.
M = {"net": {"alpha": 1e-6, "beta": 1e-9}, "mpi": {"alpha": 1e-6, "beta": 1e-9},
     "shm": {"alpha": 1e-7, "beta": 1e-10}}
MIB = 1 << 20


class ScalingModelTest(unittest.TestCase):
    def test_two_hosts_one_rank_each_is_two_half_messages(self):
        # Ring and hierarchical on 2 x 1: 2 steps of S/2 over the network.
        want = 2 * (1e-6 + MIB / 2 * 1e-9)
        self.assertAlmostEqual(model.ring_time(M, 2, 1, MIB), want, places=12)
        self.assertAlmostEqual(model.hierarchical_time(M, 2, 1, MIB), want, places=12)
        # MPI: Rabenseifner on 2 leaders: 2 latencies, 2(N-1)/N S bytes.
        self.assertAlmostEqual(model.mpi_time(M, 2, 1, MIB), 2e-6 + MIB * 1e-9, places=12)

    def test_hierarchical_adds_the_node_and_shares_the_nic(self):
        # 4 nodes x 2: shm 2 a + 2(1/2) S b, network 2(3)(a + S/4 b).
        want = 2e-7 + MIB * 1e-10 + 6 * (1e-6 + MIB / 4 * 1e-9)
        self.assertAlmostEqual(model.hierarchical_time(M, 4, 2, MIB), want, places=12)
        # The flat ring on the same 8 ranks: 14 steps of S/8, each crossing a node.
        self.assertAlmostEqual(model.ring_time(M, 4, 2, MIB), 14 * (1e-6 + MIB / 8 * 1e-9),
                               places=12)

    def test_small_mpi_messages_use_recursive_doubling(self):
        # MPICH 4.0.2's selection: 8 B on 8 nodes is recursive doubling, log2(8) = 3
        # steps of the whole message; 64 B (16 elements >= 8) is reduce-scatter +
        # allgather: 2 steps each of 32, 16 and 8 B.
        self.assertAlmostEqual(model.mpi_time(M, 8, 1, 8), 3 * (1e-6 + 8e-9), places=12)
        self.assertAlmostEqual(model.mpi_time(M, 8, 1, 64),
                               2 * (3e-6 + (32 + 16 + 8) * 1e-9), places=12)
        # 3 nodes: the third folds in first and gets the result last (2 whole
        # messages), the other two halve and double: 2 steps of S/2.
        self.assertAlmostEqual(model.mpi_time(M, 3, 1, MIB),
                               2 * (1e-6 + MIB * 1e-9) + 2 * (1e-6 + MIB / 2 * 1e-9), places=12)

    def test_fit_recovers_alpha_and_beta(self):
        points = [(s, 2 * 5e-6 + s * 2e-9) for s in (8, 64, 512, 4096, 1 << 18, 1 << 21)]
        alpha, beta = model.fit_alpha_beta(points, 2)
        # alpha: half the median time at 8 B to 4 KiB (the mean of 64 B's and 512 B's),
        # so it carries their S beta as well: (64 + 512) / 2 * 2 ns / 2.
        self.assertAlmostEqual(alpha, 5e-6 + 288 * 2e-9 / 2, places=12)
        self.assertAlmostEqual(beta, 2e-9, delta=2e-11)

    def test_large_class_has_its_own_alpha(self):
        # Small messages: 5 us; from 64 KiB per message a line of 40 us and 2 ns/B.
        small = [(s, 2 * 5e-6) for s in (8, 64, 512, 4096)]
        large = [(s, 2 * 40e-6 + s * 2e-9) for s in (1 << 17, 1 << 19, 1 << 21)]
        self.assertIsNone(model.fit_large(small, 2))
        alpha_large, beta = model.fit_large(small + large + large, 2)
        self.assertAlmostEqual(alpha_large, 40e-6, places=12)
        self.assertAlmostEqual(beta, 2e-9, places=15)
        link = {"alpha": 5e-6, "alpha_large": 40e-6, "large_from": 1 << 16, "beta": 2e-9}
        m = {"net": link, "mpi": link, "shm": link}
        # 2 x 1 ring: 2 steps of S/2; 64 KiB is small (32 KiB steps), 1 MiB is large.
        self.assertAlmostEqual(model.ring_time(m, 2, 1, 1 << 16), 2 * (5e-6 + (1 << 15) * 2e-9),
                               places=12)
        self.assertAlmostEqual(model.ring_time(m, 2, 1, MIB), 2 * (40e-6 + MIB / 2 * 2e-9),
                               places=12)

    def test_measured_steps_are_joined_by_lines(self):
        # Steps of 64 KiB, 256 KiB and 1 MiB measured at 1, 5 and 13 ms: the time of
        # a step between two is on the line through them, past the last on the
        # last line, below the first the alpha-beta of the link.
        points = [(2 * m, 2 * t) for m, t in ((1 << 16, 1e-3), (1 << 18, 5e-3), (1 << 20, 13e-3))]
        steps = model.fit_steps(points + points, 2)
        self.assertEqual(steps, [[1 << 16, 1e-3], [1 << 18, 5e-3], [1 << 20, 13e-3]])
        link = {"alpha": 1e-6, "beta": 1e-9, "steps": steps}
        self.assertAlmostEqual(model.step_time(link, 5 << 16), 5e-3 + (1 << 16) * 8e-3 / (3 << 18))
        self.assertAlmostEqual(model.step_time(link, 2 << 20), 13e-3 + (1 << 20) * 8e-3 / (3 << 18))
        self.assertAlmostEqual(model.step_time(link, 1024), 1e-6 + 1024e-9)
        # The 2 x 1 ring is two such steps of S/2.
        m = dict(M, net=link)
        self.assertAlmostEqual(model.ring_time(m, 2, 1, 1 << 19), 2 * 5e-3)

    def test_a_crossing_rank_runs_at_its_own_rate_or_the_links(self):
        # net (a rank sending and receiving across at once) 3 ns/B; the link 1 ns/B.
        m = dict(M, net={"alpha": 1e-6, "beta": 3e-9})
        # 2 x 1: each rank sends and receives across: its own rate.
        self.assertAlmostEqual(model.ring_time(m, 2, 1, MIB), 2 * (1e-6 + MIB / 2 * 3e-9),
                               places=12)
        # 2 x 2: the crossing rank only sends (or only receives): the link's rate.
        self.assertAlmostEqual(model.ring_time(m, 2, 2, MIB), 6 * (1e-6 + MIB / 4 * 1e-9),
                               places=12)
        # Hierarchical 2 x 2: each rank S/4 each way at 3 ns/B (0.75 S ns) against
        # the link's S/2 at 1 ns/B: the rank is slower; at 1.5 ns/B the link is.
        shm = model.intra_time(m, 2, MIB)
        self.assertAlmostEqual(model.hierarchical_time(m, 2, 2, MIB) - shm,
                               2 * (1e-6 + MIB / 4 * 3e-9), places=12)
        m["net"]["beta"] = 1.5e-9
        self.assertAlmostEqual(model.hierarchical_time(m, 2, 2, MIB) - shm,
                               2 * (1e-6 + MIB / 2 * 1e-9), places=12)

    def test_oversubscribed_ranks_pay_the_one_host_run(self):
        # The pretend cluster: 2 cores shared by every host's ranks. 2 x 2 is 4 ranks
        # on 2 cores: each path adds its 1 x 4 run (a + S b) in place of its shm terms.
        over = {"ring": {"a": 4e-3, "b": 1e-9}, "shm": {"a": 3e-3, "b": 2e-9},
                "mpi": {"a": 6e-3, "b": 3e-9}}
        pretend = dict(M, machine={"cores": 2, "hosts_share_cores": True}, os={"4": over})
        self.assertAlmostEqual(model.ring_time(pretend, 2, 2, MIB),
                               model.ring_time(M, 2, 2, MIB) + 4e-3 + MIB * 1e-9, places=12)
        self.assertAlmostEqual(model.hierarchical_time(pretend, 2, 2, MIB),
                               model.hierarchical_time(M, 2, 2, MIB) - model.intra_time(M, 2, MIB)
                               + 3e-3 + MIB * 2e-9, places=12)
        self.assertAlmostEqual(model.mpi_time(pretend, 2, 2, MIB),
                               model.mpi_time(M, 2, 1, MIB) + 6e-3 + MIB * 3e-9, places=12)
        # 2 x 1 has a core per rank: nothing added.
        self.assertEqual(model.ring_time(pretend, 2, 1, MIB), model.ring_time(M, 2, 1, MIB))
        # A cluster whose nodes have their own 2 cores: 2 x 2 is not oversubscribed.
        own = dict(pretend, machine={"cores": 2, "hosts_share_cores": False})
        self.assertEqual(model.ring_time(own, 2, 2, MIB), model.ring_time(M, 2, 2, MIB))
        # 3 x 1 on the pretend cluster needs a 1 x 3 run: a clear error without one.
        with self.assertRaisesRegex(model.ModelError, "1 host x 3 ranks"):
            model.ring_time(pretend, 3, 1, MIB)

    def test_mpi_composition_on_shared_cores_is_its_measured_phases(self):
        # Note [MPI's composition on shared cores]: with os[4].mpi_node (the node
        # leader's reduce + bcast, a + S b) and os[4].mpi_leaders (the leaders'
        # exchange beside busy-polling ranks, a link class), 2 x 2 on the pretend
        # cluster is the sum: 8 ms + S 2 ns/B, then 2 steps of S/2 at 3 ns/B.
        over = {"mpi": {"a": 6e-3, "b": 3e-9}, "mpi_node": {"a": 8e-3, "b": 2e-9},
                "mpi_leaders": {"alpha": 1e-6, "beta": 3e-9}}
        pretend = dict(M, machine={"cores": 2, "hosts_share_cores": True}, os={"4": over})
        self.assertAlmostEqual(model.mpi_time(pretend, 2, 2, MIB),
                               8e-3 + MIB * 2e-9 + 2 * (1e-6 + MIB / 2 * 3e-9), places=12)
        # 1 x 4 is one node: MPI's one-host run, as before.
        self.assertAlmostEqual(model.mpi_time(pretend, 1, 4, MIB), 6e-3 + MIB * 3e-9, places=12)
        # Without the composition's classes: the one-host run plus the quiet leaders.
        del over["mpi_node"]
        self.assertAlmostEqual(model.mpi_time(pretend, 2, 2, MIB),
                               model.mpi_time(M, 2, 1, MIB) + 6e-3 + MIB * 3e-9, places=12)

    def test_read_phases_takes_the_node_leaders_columns(self):
        # 4 ranks as 2 pretend nodes (--node-size 2): leaders are ranks 0 and 2.
        text = ("# kolo-mpi-phases: 4 ranks, 2 nodes (--node-size 2), float32 sum, 5 "
                "iterations after 2 warm-ups; medians in ms\n# columns: ...\n"
                "  1024   1.0 9.0 3.0 9.0   5.0 0.0 6.0 0.0   0.5 9.0 0.25 9.0   12.0 13.0 0\n")
        path = os.path.join(self.tmp, "shm_1x4pairs_1.txt")
        with open(path, "w") as f:
            f.write(text)
        rows = model.read_phases(path)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["size"], 1024)
        for got, want in zip(rows[0]["leaders_node"], (1.5e-3, 3.25e-3)):
            self.assertAlmostEqual(got, want)
        for got, want in zip(rows[0]["leaders"], (5e-3, 6e-3)):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(rows[0]["composed"], 12e-3)
        self.assertAlmostEqual(rows[0]["whole"], 13e-3)
        self.assertEqual(model.ranks_of(path), (1, 4))

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_fit_os_takes_the_small_median_and_the_large_slope(self):
        small = [(s, t) for s in (8, 512, 32768) for t in (2e-3, 4e-3, 9e-3)]
        large = [(s, 4e-3 + s * 1e-9) for s in (1 << 19, 1 << 21, 1 << 23)]
        c = model.fit_os(small + large)
        self.assertAlmostEqual(c["a"], 4e-3)
        self.assertAlmostEqual(c["b"], 1e-9, places=15)

    def test_resnet50_is_two_buckets_of_its_bytes(self):
        buckets = model.profile_buckets(os.path.join(HERE, "..", "bench", "profiles",
                                                     "resnet50.txt"))
        self.assertEqual(sum(buckets), 102228128)
        self.assertEqual(len(buckets), 2)
        self.assertTrue(all(b <= model.FUSION_BYTES for b in buckets))

    def test_busbw_follows_nccl_tests(self):
        self.assertAlmostEqual(model.busbw(1e9, 1.0, 4), 1.5)


if __name__ == "__main__":
    sys.exit(unittest.main())
