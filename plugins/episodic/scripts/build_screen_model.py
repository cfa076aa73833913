"""Print the hex of the tiny ONNX graph `thoth_episodic.int8_screen` ships: MatMulInteger(query, codes).

    pip install onnx && python plugins/episodic/scripts/build_screen_model.py

query: uint8 [1, d]; codes: int8 [d, n]; scores: int32 [1, n]; opset 13, IR version 8.
"""

from onnx import TensorProto, helper

query = helper.make_tensor_value_info("query", TensorProto.UINT8, [1, "d"])
codes = helper.make_tensor_value_info("codes", TensorProto.INT8, ["d", "n"])
scores = helper.make_tensor_value_info("scores", TensorProto.INT32, [1, "n"])
node = helper.make_node("MatMulInteger", ["query", "codes"], ["scores"])
model = helper.make_model(
    helper.make_graph([node], "int8_screen", [query, codes], [scores]), opset_imports=[helper.make_opsetid("", 13)]
)
model.ir_version = 8
print(model.SerializeToString().hex())
