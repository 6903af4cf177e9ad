"""
Figure 2: leaders, the polytope K and the tight set S
=====================================================

Tokens evolve by the paper's layer; the leaders reach the vertices of a polytope K.
"""

import hardmax

configs = hardmax.figure2_configurations()
print(list(configs))
