#pragma once
// RAII CUDA streams and graphs. A decode step is enqueued once under stream
// capture and replayed; its inputs (token ids, start positions) live in device
// buffers the host refills before each replay. Run the captured work once
// eagerly before capturing, so that lazily loaded kernels and library handles
// are initialised outside the capture.

#include <utility>

#include "cpx/cuda/runtime/check.cuh"

namespace cpx::cuda {

/// An owned stream. It is a blocking stream: it stays ordered with the
/// synchronous copies DeviceBuffer makes on the legacy default stream.
class Stream {
public:
    Stream() { CPX_CUDA_CHECK(cudaStreamCreate(&stream_)); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() {
        if (stream_) cudaStreamDestroy(stream_);
    }
    cudaStream_t get() const { return stream_; }
    operator cudaStream_t() const { return stream_; }
    void synchronize() const { CPX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

private:
    cudaStream_t stream_ = nullptr;
};

/// An instantiated graph of work captured from a stream.
class Graph {
public:
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    Graph(Graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
    Graph& operator=(Graph&& o) noexcept {
        if (this != &o) {
            release_();
            graph_ = std::exchange(o.graph_, nullptr);
            exec_ = std::exchange(o.exec_, nullptr);
        }
        return *this;
    }
    ~Graph() { release_(); }

    /// Captures what `enqueue()` puts on `stream` (which must not be the legacy
    /// default stream) and instantiates it. If enqueue throws, the capture is
    /// ended and discarded and the exception propagates.
    template <class Enqueue>
    static Graph capture(cudaStream_t stream, Enqueue&& enqueue) {
        CPX_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        try {
            enqueue();
        } catch (...) {
            cudaGraph_t partial = nullptr;
            cudaStreamEndCapture(stream, &partial);
            if (partial) cudaGraphDestroy(partial);
            throw;
        }
        Graph g;
        CPX_CUDA_CHECK(cudaStreamEndCapture(stream, &g.graph_));
        CPX_CUDA_CHECK(cudaGraphInstantiate(&g.exec_, g.graph_, 0));
        return g;
    }

    /// Enqueues one replay on `stream`.
    void launch(cudaStream_t stream) const {
        require<CudaError>(exec_ != nullptr, "cuda::Graph::launch: the graph is empty");
        CPX_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    }

private:
    void release_() noexcept {
        if (exec_) cudaGraphExecDestroy(exec_);
        if (graph_) cudaGraphDestroy(graph_);
        exec_ = nullptr;
        graph_ = nullptr;
    }
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cpx::cuda
