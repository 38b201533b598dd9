// The training demo's model: a multi-layer perceptron with tanh hidden layers and a
// softmax cross-entropy loss, trained by SGD with momentum. Plain float64 loops:
// the model is tiny (2-16-16-2 has 354 parameters) and the point is the gradient
// exchange, not the arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "train_demo_data.h"

namespace kolo::tools {

// out = w * in + b, with w row-major [out][in].
struct Dense {
  int in = 0;
  int out = 0;
  std::vector<double> w;
  std::vector<double> b;
};

struct Mlp {
  std::vector<Dense> layers;
};

// widths = {inputs, hidden..., classes}; Glorot-uniform weights from seed, zero
// biases. The same seed gives bit-identical weights everywhere.
Mlp make_mlp(const std::vector<int>& widths, uint64_t seed);

// A model of the same shape with every parameter zero.
Mlp zeros_like(const Mlp& model);

struct BatchResult {
  double loss_sum = 0.0;  // sum over samples of the cross-entropy (unscaled)
  int correct = 0;        // samples whose prediction (before the update) is right
};

// Forward and backward over batch. Each grads->layers[l] receives scale times the
// sum over the batch of the loss gradient. Backward runs from the last layer to
// the first and calls on_layer(l) as soon as layer l's gradients are final, so a
// caller can start exchanging them while earlier layers are still computed; after
// that call, grads->layers[l] is not touched again.
BatchResult forward_backward(const Mlp& model, const Dataset& batch, double scale, Mlp* grads,
                             const std::function<void(int layer)>& on_layer);

// Fraction of data classified correctly.
double accuracy(const Mlp& model, const Dataset& data);

// velocity = momentum * velocity + grad; param -= learning_rate * velocity.
class MomentumSgd {
 public:
  MomentumSgd(const Mlp& model, double learning_rate, double momentum);
  void step(const Mlp& grads, Mlp* model);

 private:
  double learning_rate_;
  double momentum_;
  Mlp velocity_;
};

// Every parameter in one vector, layer by layer (w then b).
std::vector<double> flatten(const Mlp& model);

}  // namespace kolo::tools
