"""scons compare's report: each workload is compared with the library PyTorch runs it with."""

from kernelgen import compare
from kernelgen.workloads import Conv2dProblem, GemmProblem


class Device:
    gpu, driver, cuda, cutlass = "NVIDIA H200", "580", "13.0", "4.2.0"


def row(library, kernel_ms, library_ms, graph_ms=None):
    graph_ms = library_ms if graph_ms is None else graph_ms
    return {"layer": "l", "kernel": "k", "kernel_ms": kernel_ms, "cudnn_ms": library_ms, "cudnn_graph_ms": graph_ms,
            "floor_ms": 0.5, "kernel_vs_cudnn": kernel_ms / library_ms, "library": library,
            "measured_at": "2026-11-30T00:00:00Z"}


def report(rows):
    return compare.report(rows, (4e12, 7e14), Device(), {"torch": "2.11", "cudnn": "91900"}, "t")


def test_the_report_names_the_library_each_set_was_compared_with():
    conv = report([row("cudnn", 1.0, 2.0), row("cudnn", 3.0, 2.0)])
    assert "| kernel ms | cuDNN ms | in a graph ms |" in conv and "cuBLAS" not in conv.split("\n", 3)[3]
    assert "Against cuDNN: sum 1.00; kernels faster on 1 of 2 layers; geometric mean 0.87; worst layer 1.50." in conv
    gemm = report([row("cublas", 1.0, 2.0)])
    assert "| kernel ms | cuBLAS ms |" in gemm and "Against cuBLAS: sum 0.50; kernels faster on 1 of 1" in gemm
    assert "| kernel ms | cuDNN / cuBLAS ms |" in report([row("cublas", 1.0, 2.0), row("cudnn", 1.0, 2.0)])


def test_a_gemm_workload_is_timed_with_cublas_a_convolution_with_cudnn(monkeypatch):
    calls = []
    monkeypatch.setattr(compare, "time_cublas", lambda torch, p, l2: calls.append(("cublas", p)) or (1.0, 0.5))
    monkeypatch.setattr(compare, "time_cudnn", lambda torch, p, l2: calls.append(("cudnn", p)) or (2.0, 1.5))
    gemm, conv = GemmProblem(m=256, n=1000, k=2048), Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3)
    assert compare.time_library(None, gemm, 1 << 20) == ("cublas", 1.0, 0.5)
    assert compare.time_library(None, conv, 1 << 20) == ("cudnn", 2.0, 1.5)
    assert calls == [("cublas", gemm), ("cudnn", conv)]


def test_the_report_sets_the_library_in_a_graph_beside_it_call_by_call():
    text = report([row("cudnn", 1.0, 2.0, graph_ms=0.8), row("cudnn", 1.0, 1.0, graph_ms=1.0)])
    assert "| 0 | l | `k` | 1.0000 | 2.0000 | 0.8000 | 0.5000 | 0.50 | 25% |" in text
    assert "| sum | | | 2.000 | 3.000 | 1.800 | 1.000 | 0.67 | 33% |" in text
    assert "Against cuDNN in a graph: sum 1.11; kernels faster on 0 of 2 layers" in text
    assert "worst layer 1.25." in text


class FakeCuda:
    """A GPU that runs each call's kernel in KERNEL_MS, fed by a host that spends HOST_MS per call
    (PyTorch's dispatch); events time the GPU, idle or not, as CUDA's do."""

    KERNEL_MS, HOST_MS, REPLAY_MS = 0.02, 0.05, 0.01

    def __init__(self):
        self.host = self.gpu = 0.0
        self.capturing = None
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                fake.gpu = max(fake.gpu, fake.host)
                self.at = fake.gpu

            def synchronize(self):
                fake.host = max(fake.host, fake.gpu)

            def elapsed_time(self, end):
                return end.at - self.at

        class Stream:
            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def __init__(self):
                self.kernels = 0

            def replay(self):
                fake.host += fake.REPLAY_MS
                fake.gpu = max(fake.gpu, fake.host) + self.kernels * fake.KERNEL_MS

        class Capture:
            def __init__(self, graph):
                self.graph = graph

            def __enter__(self):
                fake.capturing = self.graph

            def __exit__(self, *exc):
                fake.capturing = None

        self.Event, self.Stream, self.CUDAGraph = Event, Stream, CUDAGraph
        self.graph = Capture
        self.stream = lambda s: Capture(None)
        self.current_stream = Stream

    def synchronize(self):
        self.host = max(self.host, self.gpu)

    def launch(self):
        self.host += self.HOST_MS
        if self.capturing is not None:
            self.capturing.kernels += 1
        else:
            self.gpu = max(self.gpu, self.host) + self.KERNEL_MS


class FakeTorch:
    def __init__(self):
        self.cuda = FakeCuda()


def test_a_graph_times_the_library_without_the_hosts_cost_per_call():
    torch = FakeTorch()
    eager = compare.time_calls(torch, lambda i: torch.cuda.launch(), 4)
    graphed = compare.time_graph(torch, lambda i: torch.cuda.launch(), 4)
    assert abs(eager[0] - FakeCuda.HOST_MS) < 1e-6, "call by call, the GPU waits on the host"
    assert abs(graphed[0] - FakeCuda.KERNEL_MS) < 1e-3, "replayed, only the kernels count"
