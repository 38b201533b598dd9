#include "train_demo_model.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kolo::tools {
namespace {

using Matrix = std::vector<double>;  // row-major, one row per sample

// z = x * w^T + b for n samples.
Matrix affine(const Dense& layer, const Matrix& x, int n) {
  Matrix z(static_cast<size_t>(n) * layer.out);
  for (int s = 0; s < n; ++s) {
    for (int o = 0; o < layer.out; ++o) {
      double sum = layer.b[o];
      for (int i = 0; i < layer.in; ++i) sum += layer.w[o * layer.in + i] * x[s * layer.in + i];
      z[s * layer.out + o] = sum;
    }
  }
  return z;
}

// Turns logits into softmax probabilities in place; returns the loss sum and
// counts correct predictions.
BatchResult softmax_cross_entropy(Matrix* logits, const std::vector<int>& labels, int classes) {
  BatchResult result;
  for (size_t s = 0; s < labels.size(); ++s) {
    double* row = logits->data() + s * classes;
    const int predicted = static_cast<int>(std::max_element(row, row + classes) - row);
    const double top = row[predicted];
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += (row[c] = std::exp(row[c] - top));
    for (int c = 0; c < classes; ++c) row[c] /= total;
    result.loss_sum -= std::log(std::max(row[labels[s]], 1e-300));
    result.correct += predicted == labels[s] ? 1 : 0;
  }
  return result;
}

// Fills grad from delta (n x out) and the layer's input x (n x in).
void layer_gradient(const Matrix& delta, const Matrix& x, int n, Dense* grad) {
  std::fill(grad->w.begin(), grad->w.end(), 0.0);
  std::fill(grad->b.begin(), grad->b.end(), 0.0);
  for (int s = 0; s < n; ++s) {
    for (int o = 0; o < grad->out; ++o) {
      const double d = delta[s * grad->out + o];
      grad->b[o] += d;
      for (int i = 0; i < grad->in; ++i) grad->w[o * grad->in + i] += d * x[s * grad->in + i];
    }
  }
}

// The delta of the layer below: (delta * w) times tanh' at that layer's output.
Matrix backpropagate(const Dense& layer, const Matrix& delta, const Matrix& activation, int n) {
  Matrix below(static_cast<size_t>(n) * layer.in, 0.0);
  for (int s = 0; s < n; ++s) {
    for (int o = 0; o < layer.out; ++o) {
      const double d = delta[s * layer.out + o];
      for (int i = 0; i < layer.in; ++i) below[s * layer.in + i] += d * layer.w[o * layer.in + i];
    }
    for (int i = 0; i < layer.in; ++i) {
      const double a = activation[s * layer.in + i];
      below[s * layer.in + i] *= 1.0 - a * a;
    }
  }
  return below;
}

// Activations of every layer: [0] the input, [l + 1] the output of layer l (the
// last one holds logits).
std::vector<Matrix> forward(const Mlp& model, const Dataset& batch) {
  const int n = batch.size();
  std::vector<Matrix> acts{batch.x};
  for (size_t l = 0; l < model.layers.size(); ++l) {
    Matrix z = affine(model.layers[l], acts.back(), n);
    if (l + 1 < model.layers.size()) {
      for (double& v : z) v = std::tanh(v);
    }
    acts.push_back(std::move(z));
  }
  return acts;
}

}  // namespace

Mlp make_mlp(const std::vector<int>& widths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Mlp model;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    Dense layer;
    layer.in = widths[l];
    layer.out = widths[l + 1];
    const double limit = std::sqrt(6.0 / (layer.in + layer.out));
    for (int k = 0; k < layer.in * layer.out; ++k) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      layer.w.push_back((2.0 * u - 1.0) * limit);
    }
    layer.b.assign(layer.out, 0.0);
    model.layers.push_back(std::move(layer));
  }
  return model;
}

Mlp zeros_like(const Mlp& model) {
  Mlp zeros = model;
  for (Dense& layer : zeros.layers) {
    std::fill(layer.w.begin(), layer.w.end(), 0.0);
    std::fill(layer.b.begin(), layer.b.end(), 0.0);
  }
  return zeros;
}

BatchResult forward_backward(const Mlp& model, const Dataset& batch, double scale, Mlp* grads,
                             const std::function<void(int layer)>& on_layer) {
  const int n = batch.size();
  const int last = static_cast<int>(model.layers.size()) - 1;
  std::vector<Matrix> acts = forward(model, batch);
  Matrix delta = std::move(acts.back());
  const BatchResult result = softmax_cross_entropy(&delta, batch.y, model.layers[last].out);
  // d(loss)/d(logits) = softmax - onehot, scaled.
  for (int s = 0; s < n; ++s) {
    double* row = delta.data() + s * model.layers[last].out;
    row[batch.y[s]] -= 1.0;
    for (int c = 0; c < model.layers[last].out; ++c) row[c] *= scale;
  }
  for (int l = last; l >= 0; --l) {
    layer_gradient(delta, acts[l], n, &grads->layers[l]);
    on_layer(l);
    if (l > 0) delta = backpropagate(model.layers[l], delta, acts[l], n);
  }
  return result;
}

double accuracy(const Mlp& model, const Dataset& data) {
  if (data.size() == 0) return 0.0;
  std::vector<Matrix> acts = forward(model, data);
  Matrix logits = std::move(acts.back());
  const BatchResult result = softmax_cross_entropy(&logits, data.y, model.layers.back().out);
  return static_cast<double>(result.correct) / data.size();
}

MomentumSgd::MomentumSgd(const Mlp& model, double learning_rate, double momentum)
    : learning_rate_(learning_rate), momentum_(momentum), velocity_(zeros_like(model)) {}

void MomentumSgd::step(const Mlp& grads, Mlp* model) {
  for (size_t l = 0; l < model->layers.size(); ++l) {
    auto update = [&](std::vector<double>& param, std::vector<double>& velocity,
                      const std::vector<double>& grad) {
      for (size_t k = 0; k < param.size(); ++k) {
        velocity[k] = momentum_ * velocity[k] + grad[k];
        param[k] -= learning_rate_ * velocity[k];
      }
    };
    update(model->layers[l].w, velocity_.layers[l].w, grads.layers[l].w);
    update(model->layers[l].b, velocity_.layers[l].b, grads.layers[l].b);
  }
}

std::vector<double> flatten(const Mlp& model) {
  std::vector<double> flat;
  for (const Dense& layer : model.layers) {
    flat.insert(flat.end(), layer.w.begin(), layer.w.end());
    flat.insert(flat.end(), layer.b.begin(), layer.b.end());
  }
  return flat;
}

}  // namespace kolo::tools
