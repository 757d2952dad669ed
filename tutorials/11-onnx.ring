# ONNX: export, inspect, and a Gemm graph built by hand.
# Play it with `play onnx` (pause waits for Enter), `play onnx auto` or `... step`. It writes m.onnx,
# gemm.onnx and lesson.onnx in the current folder.

say "ONNX (Open Neural Network Exchange) is an open file format for models: a graph of standard operators plus the weights, which another framework, a runtime or a compiler can read. A model trained here can be served by ONNX Runtime, and a graph written by Python's onnx package can be read here."
set threads=1 seed=1
model m = mlp 784-256-10
data d = digits n=2000
train m on d steps=30 eval=off
pause

say "export writes the model as an ONNX graph. onnx show reads the file back, as a runtime would: inputs and outputs with their shapes (batch is a symbolic dimension, any batch size goes), the initializers (the weights), and the nodes."
export m m.onnx
onnx show m.onnx
say "Each linear layer became one Gemm node (general matrix multiply: Y = X times W transposed, plus B, transB=1), with a Relu between them: 3 nodes. The initializers hold every parameter, 203,530 floats, 814,120 bytes: the model's weights, nothing more."
expect nodes = 3
expect values = 203530
expect bytes = 814120
expect opset = 17
pause

say "The file comes back as a model: model NAME = onnx FILE rebuilds the layers from the graph and copies the weights in, so it evaluates, trains and exports again like any model."
model g = onnx m.onnx
show g
expect params = 203530
eval m on d
eval g on d
say "The same accuracy and loss from the original and from the file: the graph computes the same function."
pause

say "Now a graph by hand, the way the onnx Python package builds one with onnx.helper: inputs (make_tensor_value_info), a node (make_node), then the graph and the model. The lecture's example: two inputs X and A of shape [None, 2], and one Gemm node with transA=1, which computes X transposed times A."
onnx new test-model
onnx input X N,2
onnx input A N,2
onnx node Gemm X,A Y "transA=1"
say "X transposed is 2 x N and A is N x 2, so Y is 2 x 2 whatever N is. The lecture's example declares Y as [None, 1], and onnx.checker.check_model accepts it, because the default check does not infer shapes; ONNX's shape inference in strict mode refuses it, and ONNX Runtime warns and computes a 2 x 2. We declare what the node really gives."
onnx output Y 2,2
onnx save gemm.onnx
expect nodes = 1
expect inputs = 2
expect initializers = 0
expect findings = 0
pause

say "A Gemm with weights, as a linear layer is exported: input X of [N, 4], an initializer W of 3 x 4 drawn from a seed, a bias B of 3 zeros (seed=0), and Y = X W^T + B. One input and weights of a known layer: the importer reads it back as a linear layer of 15 parameters."
onnx new lesson
onnx input X N,4
onnx init W 3,4 seed=1
onnx init B 3 seed=0
onnx node Gemm X,W,B Y "transB=1"
onnx output Y N,3
onnx save lesson.onnx
expect values = 15
expect initializers = 2
model l = onnx lesson.onnx
show l
expect params = 15
say "In Python, onnxruntime.InferenceSession('gemm.onnx').run(None, {'X': x, 'A': a}) gives x.T @ a. The test suite runs this tutorial's three files in ONNX Runtime and checks them against NumPy, and ringside's export against its own outputs."
