"""A scripted model server for real agent CLIs: three wire protocols on 127.0.0.1, behaviour from per-task brains."""
