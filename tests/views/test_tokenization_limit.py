"""views/Tokenization.py through AppTest: the max_len metric says where a typed source is
really cut (OpenedModel.length_limit: the model's max_len, or the length budget of typed text
when it is less, as for an opus-mt-sized model whose max_len is 512 and budget 305)."""



def test_the_max_len_metric_names_the_real_limit(shared_app):
    at = shared_app.page("views/Tokenization.py")
    (metric,) = [m for m in at.metric if m.label == "Longest sequence (max_len)"]
    assert metric.value == "64"
    assert metric.proto.help == "A typed source is cut at the model's max_len (64 tokens)."
