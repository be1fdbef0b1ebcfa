"""etp_viz: eligibility-trace propagation (D-RTRL, ES-D-RTRL) for recurrent and spiking
networks in JAX, with an interactive Jupyter explorer.

This module only re-exports. The engine (``ops``, ``compiler``, ``learn``, ``nn``) imports
without the widget stack; explorer names are resolved lazily on first use.
"""

__version__ = "0.1.0"

# --- ops (etp_viz.ops) -------------------------------------------------------------------
# --- nn (etp_viz.nn) ---------------------------------------------------------------------
# --- compiler (etp_viz.compiler) ---------------------------------------------------------
# --- learn (etp_viz.learn) ---------------------------------------------------------------
# --- explorer (lazy: needs the [explorer] extra) ----------------------------------------
