"""jaxsim: a MuJoCo-class physics simulator in JAX with its own MJCF compiler.

This module is the public API and only re-exports it; the engine lives in `jaxsim._src`
(see DESIGN.md, "The house"). The RL layer is `jaxsim.envs` (imported on its own).
"""

from jaxsim._src.actuation import actuator_moment_dense as actuator_moment_dense
from jaxsim._src.check import describe_warnings as describe_warnings
from jaxsim._src.dynamics import qLD_dense as qLD_dense
from jaxsim._src.enums import BiasType as BiasType
from jaxsim._src.enums import ConeType as ConeType
from jaxsim._src.enums import DisableBit as DisableBit
from jaxsim._src.enums import DynType as DynType
from jaxsim._src.enums import EnableBit as EnableBit
from jaxsim._src.enums import EqType as EqType
from jaxsim._src.enums import GainType as GainType
from jaxsim._src.enums import GeomType as GeomType
from jaxsim._src.enums import IntegratorType as IntegratorType
from jaxsim._src.enums import JacobianType as JacobianType
from jaxsim._src.enums import JointType as JointType
from jaxsim._src.enums import SolverType as SolverType
from jaxsim._src.enums import TrnType as TrnType
from jaxsim._src.enums import WrapType as WrapType
from jaxsim._src.forward import forward as forward
from jaxsim._src.forward import step as step
from jaxsim._src.forward import step1 as step1
from jaxsim._src.forward import step2 as step2
from jaxsim._src.inverse import inverse as inverse
from jaxsim._src.io import load as load
from jaxsim._src.io import load_string as load_string
from jaxsim._src.kinematics import kinematics as kinematics
from jaxsim._src.model import build as build
from jaxsim._src.model import hessian_rows as hessian_rows
from jaxsim._src.model import make_data as make_data
from jaxsim._src.model import with_hessian_rows as with_hessian_rows
from jaxsim._src.model import with_max_geom_pairs as with_max_geom_pairs
from jaxsim._src.model import with_ncon_max as with_ncon_max
from jaxsim._src.model import with_options as with_options
from jaxsim._src.rollout import rollout as rollout
from jaxsim._src.sparse import efc_J_dense as efc_J_dense
from jaxsim._src.stages import unsupported as unsupported
from jaxsim._src.types import Contact as Contact
from jaxsim._src.types import Data as Data
from jaxsim._src.types import Impl as Impl
from jaxsim._src.types import Model as Model
from jaxsim._src.types import Option as Option
from jaxsim._src.xla import configure_cpu as configure_cpu  # first: XLA flags before JAX starts
from jaxsim.errors import ModelError as ModelError

__version__ = '0.1.0'
