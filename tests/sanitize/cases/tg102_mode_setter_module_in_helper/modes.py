def switch(models, training):
    assert isinstance(training, bool)
    for m in models:
        m.train(training)
