#!/usr/bin/python3
"""Checks of tools/scaling_model.py against values worked out by hand."""
import importlib.util
import os
import sys
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
        # 8 nodes x 1, 64 B: log2(8) = 3 steps of the whole message.
        self.assertAlmostEqual(model.mpi_time(M, 8, 1, 64), 3 * (1e-6 + 64e-9), places=12)

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
