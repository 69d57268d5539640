# SPDX-License-Identifier: MIT
# mpi_env.sh - sourced by tests/mpi.sh and tests/mpi_linear.sh: the environment both run mpirun
# in. Sets POCL_DEVICES (two PoCL devices unless the caller chose) and $flags, the mpirun options
# for Open MPI in containers (oversubscription for more ranks than cores, running as root), and
# exports Open MPI's settings for them: no ssh for local launches, no cross-memory attach.
POCL_DEVICES=${POCL_DEVICES-pthread pthread}
export POCL_DEVICES
flags=
if mpirun --version 2>/dev/null | grep -q 'Open MPI'; then
  flags="--oversubscribe"
  [ "$(id -u)" -eq 0 ] && flags="$flags --allow-run-as-root"
  OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism-none}
  OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent-}
  export OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_plm_rsh_agent
fi
