"""The project's split module: its top-level code shuffles the file list with Python's global
random generator when it is imported (the user's own draw, made at import time)."""
import random

import tg501_imagestub

FILES = tg501_imagestub.file_names(40)
random.shuffle(FILES)
TRAIN, VALID = FILES[:32], FILES[32:]
