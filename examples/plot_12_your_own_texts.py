"""
Your own texts: k classes from any labelled table
=================================================

Any CSV, TSV, JSON Lines or Parquet file with a text column and a label column (k ≥ 2 classes, and
optionally a split or a group column) trains the same classifier. Here the table is made from IMDb's star
ratings (classes 1-2, 3-4, 7-8, 9-10: four classes, harder than the sign) and written as Parquet; with your
own file, start at ``DataConfig``. The model is small (10,000 reviews, :math:`d = 8`, three epochs).
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pyarrow as pa
import pyarrow.parquet as pq

import hardmax
from hardmax.data import DataConfig, load_imdb, read_reviews, resolve_imdb_path
from hardmax.explain import predict_texts

scratch = tempfile.TemporaryDirectory()                                # removed at the end
work = Path(scratch.name)
reviews = read_reviews(resolve_imdb_path(progress=False))              # the archive's reviews and ratings
stars = {1: "1-2", 2: "1-2", 3: "3-4", 4: "3-4", 7: "7-8", 8: "7-8", 9: "9-10", 10: "9-10"}
rows = range(0, len(reviews), 5)                                        # every fifth review: 10,000
pq.write_table(pa.table({"text": [reviews.texts[i] for i in rows],
                         "stars": [stars[int(reviews.ratings[i])] for i in rows],
                         "split": [reviews.split[i] for i in rows]}), work / "ratings.parquet")

data = load_imdb(DataConfig(path=str(work / "ratings.parquet"), text_column="text", label_column="stars",
                            split_column="split", min_count=2), progress=False)
model_config = hardmax.ModelConfig(vocab_size=len(data.vocab), d=8, classes=data.classes)
result = hardmax.train(data.train, data.val, model_config=model_config, run_dir=work / "run",
                       train_config=hardmax.TrainConfig(epochs=3), vocab=data.vocab, data_info=data.info(),
                       progress=False)
test = hardmax.evaluate(result.model, data.test)
print(f"{data.classes} classes {data.label_names}: test accuracy {test.accuracy_hardmax:.3f}, "
      f"macro-F1 {test.macro_f1_hardmax:.3f} (exact hardmax)")

run = hardmax.load_run(work / "run")
texts = ["A masterpiece, moving and beautifully acted.", "Dull. I wanted my evening back."]
for text, p in zip(texts, predict_texts(run, texts), strict=True):          # class, probabilities, leaders, decisive words
    print(f"{p.label:>5} ({max(p.probabilities.values()):.2f})  {text}")

fig, ax = plt.subplots(figsize=(4.2, 3.8))
confusion = test.confusion_hardmax
ax.imshow(confusion, cmap="Blues")
for i, row in enumerate(confusion):
    for j, count in enumerate(row):
        ax.text(j, i, str(count), ha="center", va="center", fontsize=8)
ax.set_xticks(range(data.classes), data.label_names)
ax.set_yticks(range(data.classes), data.label_names)
ax.set_xlabel("predicted")
ax.set_ylabel("true stars")
fig.tight_layout()
plt.show()
scratch.cleanup()
