# compile, plan and `model = plan`: their help and every refusal (successful compiles print oneDNN's
# kernels and this ISA's layouts, so tests/plan checks those)
help compile
help plan
model c = mlp 20-8-3
compile nothere -> x.plan
compile c -> c.onnx
compile c precision=int8 -> c.plan
compile c batch=0 -> c.plan
compile c c.plan
plan frob c.plan
plan show
plan show missing.plan
plan show 12-plan.ring
model p = plan 12-plan.ring
compile c precision=int8 calib=nodata -> c.plan
compile c precision=int8 calib_method=kl -> c.plan
compile c precision=int8 calib_pct=0 -> c.plan
compile c device=cuda precision=int8 -> c.plan
compile c device=gpu -> c.plan
