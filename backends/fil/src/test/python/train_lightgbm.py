"""Trains the fil backend's LightGBM test models (made at test time, never committed).

    python train_lightgbm.py OUT

OUT/<model>/model.txt   LightGBM's text format (Booster.save_model)
OUT/<model>/expected.f64  Booster.predict(rows): float64, row-major, little-endian
OUT/rows.f32            the rows predicted: 64 x 8 float32, little-endian, about 1 value in 16 NaN (missing)
"""
import os
import sys

import numpy as np

try:
    import lightgbm as lgb
except ImportError as e:  # the Java test skips on this line, naming tools/model-env.sh
    sys.exit(f"lightgbm is missing: {e}")

out = sys.argv[1]
features = 8
rng = np.random.default_rng(3)
X = rng.normal(size=(600, features)).astype(np.float32)
X[rng.random(X.shape) < 1 / 16] = np.nan
a, b, c = (np.nan_to_num(X[:, i]) for i in range(3))
models = {
    "lgb_binary": ({"objective": "binary"}, (a + b * c > 0).astype(int)),
    "lgb_regression": ({"objective": "regression"}, 2 * a - b + c * c),
    "lgb_multiclass": ({"objective": "multiclass", "num_class": 3}, np.digitize(a + b, [-0.5, 0.5])),
}
rows = rng.normal(size=(64, features)).astype(np.float32)
rows[rng.random(rows.shape) < 1 / 16] = np.nan
for name, (params, y) in models.items():
    params.update(num_leaves=15, learning_rate=0.2, verbose=-1, seed=1, num_threads=1, deterministic=True)
    booster = lgb.train(params, lgb.Dataset(X, y), num_boost_round=20)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    booster.save_model(os.path.join(out, name, "model.txt"))
    np.asarray(booster.predict(rows), dtype="<f8").tofile(os.path.join(out, name, "expected.f64"))
rows.astype("<f4").tofile(os.path.join(out, "rows.f32"))
print("trained", ", ".join(models), "with lightgbm", lgb.__version__)
