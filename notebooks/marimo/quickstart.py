"""etp_viz in marimo: the live explorer of a teaching task.

    pip install "etp-viz[explorer]" marimo
    marimo edit notebooks/marimo/quickstart.py     # or: marimo run (an app, code hidden)

The explorer is an anywidget; marimo hosts it through ``mo.ui.anywidget``. Step / Run / Pause
in the widget drive the online-learning session in the notebook's kernel.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import warnings

    import marimo as mo

    import etp_viz

    return etp_viz, mo, warnings


@app.cell
def _(mo):
    mo.md(
        """
        # etp_viz quickstart

        A small recurrent net learns a sine wave **online** (D-RTRL: one gradient per step,
        no backpropagation through time). Click a weight in the graph to see whether and why it
        is learned online; press **Step** or **Run** to train and watch the loss, the
        eligibility traces and the gradient fidelity against BPTT.
        """
    )
    return


@app.cell
def _(etp_viz, mo, warnings):
    task = etp_viz.tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the teaching model compiles with notes
        ex = etp_viz.show(
            task.suggested_model(), task.example_input(), task=task, steps_per_frame=5
        )
    explorer = mo.ui.anywidget(ex)
    explorer
    return ex, explorer, task


@app.cell
def _(ex):
    # the same session from Python: ex.step(20), ex.run(2_000), ex.pause(), ex.history
    ex.summary()
    return


if __name__ == "__main__":
    app.run()
